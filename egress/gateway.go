package egress

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pyjail/pyjail/policy"
	"github.com/pyjail/pyjail/record"
)

// Log attribute keys.
const (
	logHost    = "host"
	logPort    = "port"
	logScheme  = "scheme"
	logReason  = "reason"
	logVerdict = "verdict"
)

// Config configures a Gateway. The zero value serves with the host's
// resolver, dialer and trust store.
type Config struct {
	// Logger receives one line per refusal; nil discards. Header values
	// and payloads are never logged.
	Logger *slog.Logger
	// Lookup resolves a name on the host; nil uses net.DefaultResolver.
	// Tests point it at a fake DNS to play rebinding answers.
	Lookup func(ctx context.Context, host string) ([]netip.Addr, error)
	// Dial connects to a resolved address; nil uses a net.Dialer with a
	// 10 s timeout.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// RootCAs verifies upstreams of rules with upstream "https"; nil
	// uses the host's trust store.
	RootCAs *x509.CertPool
	// Getenv reads inject values named by env; nil uses os.Getenv.
	Getenv func(string) string
	// ReadFile reads inject values named by file; nil uses os.ReadFile.
	ReadFile func(string) ([]byte, error)
	// MaxEntries caps a run's network list (default 256); later
	// attempts are only counted.
	MaxEntries int
	// HandshakeTimeout bounds reading a request line and headers, and a
	// ClientHello (default 10 s).
	HandshakeTimeout time.Duration
}

// Gateway decides and relays the network attempts of jails. It holds no
// per-run state: each execution gets a Run. A Gateway is safe for
// concurrent use.
type Gateway struct {
	cfg Config
	log *slog.Logger
}

// New returns a Gateway.
func New(cfg Config) *Gateway {
	if cfg.Lookup == nil {
		cfg.Lookup = func(ctx context.Context, host string) ([]netip.Addr, error) {
			return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
		}
	}
	if cfg.Dial == nil {
		d := &net.Dialer{Timeout: 10 * time.Second}
		cfg.Dial = d.DialContext
	}
	if cfg.Getenv == nil {
		cfg.Getenv = os.Getenv
	}
	if cfg.ReadFile == nil {
		cfg.ReadFile = os.ReadFile
	}
	if cfg.MaxEntries <= 0 {
		cfg.MaxEntries = 256
	}
	if cfg.HandshakeTimeout <= 0 {
		cfg.HandshakeTimeout = 10 * time.Second
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Gateway{cfg: cfg, log: log}
}

// Report is what a run did on the network.
type Report struct {
	Entries []record.NetworkEntry
	// Omitted counts the entries left out past Config.MaxEntries.
	Omitted int
	// Limit, when set, is the sentence naming the limit the run passed;
	// the caller's verdict is then record.VerdictNetworkLimit.
	Limit string
}

// Run serves one execution's connections under one policy. Start it with
// Gateway.Start and end it with Close, which returns its Report. A Run is
// safe for concurrent use.
type Run struct {
	g      *Gateway
	p      *policy.Egress
	limits policy.EgressLimits
	l      net.Listener
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	nconn    atomic.Int64
	in, out  atomic.Int64
	exceeded chan struct{}

	mu      sync.Mutex
	conns   map[io.Closer]struct{}
	entries []record.NetworkEntry
	omitted int
	limit   string
}

// Start serves l's connections under p until Close. It takes l over:
// Close closes it. ctx bounds the run (its cancellation ends every
// connection), as the run's deadline does for the jail.
func (g *Gateway) Start(ctx context.Context, l net.Listener, p *policy.Egress) *Run {
	ctx, cancel := context.WithCancel(ctx)
	r := &Run{
		g: g, p: p, l: l, ctx: ctx, cancel: cancel,
		exceeded: make(chan struct{}),
		conns:    map[io.Closer]struct{}{},
	}
	if p != nil {
		r.limits = p.Limits.Effective()
	}
	r.wg.Add(1)
	go r.accept()
	context.AfterFunc(ctx, func() { _ = l.Close() })
	return r
}

// Exceeded is closed when the run passes one of its limits; every
// connection of the run has been closed by then.
func (r *Run) Exceeded() <-chan struct{} { return r.exceeded }

// Close stops serving, ends every connection and returns the report.
func (r *Run) Close() Report {
	r.cancel()
	_ = r.l.Close()
	r.closeAll()
	r.wg.Wait()
	r.mu.Lock()
	defer r.mu.Unlock()
	return Report{Entries: slices.Clone(r.entries), Omitted: r.omitted, Limit: r.limit}
}

func (r *Run) accept() {
	defer r.wg.Done()
	for {
		c, err := r.l.Accept()
		if err != nil {
			return
		}
		if !r.track(c) {
			_ = c.Close()
			return
		}
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			defer r.untrack(c)
			r.serve(c)
		}()
	}
}

// track registers a connection for closeAll; false once the run ended.
func (r *Run) track(c io.Closer) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ctx.Err() != nil || r.limit != "" {
		return false
	}
	r.conns[c] = struct{}{}
	return true
}

func (r *Run) untrack(c io.Closer) {
	_ = c.Close()
	r.mu.Lock()
	delete(r.conns, c)
	r.mu.Unlock()
}

func (r *Run) closeAll() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for c := range r.conns {
		_ = c.Close()
	}
}

// exceed records the first limit passed and ends the run's connections.
func (r *Run) exceed(sentence string) {
	r.mu.Lock()
	first := r.limit == ""
	if first {
		r.limit = sentence
	}
	r.mu.Unlock()
	if first {
		r.g.log.Info("egress limit", logReason, sentence)
		close(r.exceeded)
		_ = r.l.Close()
		r.closeAll()
	}
}

func (r *Run) add(e record.NetworkEntry) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.entries) >= r.g.cfg.MaxEntries {
		r.omitted++
		return
	}
	r.entries = append(r.entries, e)
}

// attempt is one entry in the making.
type attempt struct {
	e     record.NetworkEntry
	start time.Time
	in    atomic.Int64
	out   atomic.Int64
}

// finish records the attempt; a refusal is logged and, where the
// connection still speaks HTTP, answered with a 403 whose body is the
// reason.
func (r *Run) finish(a *attempt, verdict, reason string) {
	a.e.Verdict, a.e.Reason = verdict, reason
	a.e.BytesIn, a.e.BytesOut = a.in.Load(), a.out.Load()
	a.e.MS = time.Since(a.start).Milliseconds()
	if verdict != record.NetAllowed {
		r.g.log.Info("egress refused", logScheme, a.e.Scheme, logHost, a.e.Host, logPort, a.e.Port, logVerdict, verdict, logReason, reason)
	}
	r.add(a.e)
}

func refuse(w io.Writer, status int, sentence string) {
	body := sentence + "\n"
	_, _ = fmt.Fprintf(w, "HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s",
		status, http.StatusText(status), len(body), body)
}

func (r *Run) serve(c net.Conn) {
	a := &attempt{start: time.Now()}
	_ = c.SetReadDeadline(time.Now().Add(r.g.cfg.HandshakeTimeout))
	br := bufio.NewReader(c)
	req, err := http.ReadRequest(br)
	if err != nil {
		a.e.Scheme = "http"
		r.finish(a, record.NetRefused, "blocked a request the gateway could not read as HTTP")
		refuse(c, http.StatusBadRequest, "blocked: the gateway could not read this request as HTTP.")
		return
	}
	_ = c.SetReadDeadline(time.Time{})
	if n := r.nconn.Add(1); n > int64(r.limits.MaxConnections) {
		a.e.Scheme, a.e.Host = "http", req.Host
		s := fmt.Sprintf("network limit: more than %d connections in this run", r.limits.MaxConnections)
		r.finish(a, record.NetLimit, s)
		refuse(c, http.StatusForbidden, s)
		r.exceed(s)
		return
	}
	switch {
	case req.Method == http.MethodConnect:
		r.connect(c, br, req, a)
	case req.URL.IsAbs() && req.URL.Scheme == "http":
		r.forward(c, req, a)
	default:
		a.e.Scheme, a.e.Host, a.e.Method = "http", req.Host, req.Method
		s := "blocked: the gateway serves CONNECT for https:// and absolute http:// URLs only."
		r.finish(a, record.NetRefused, s)
		refuse(c, http.StatusBadRequest, s)
	}
}

// target is a decided destination.
type target struct {
	rule  policy.EgressRule
	host  string
	port  int
	addrs []netip.Addr
}

// decide applies the policy to one destination and resolves it. The
// returned reason, when not "", is the refusal's sentence.
func (r *Run) decide(scheme, hostport, defaultPort string) (target, string) {
	host, portStr, err := net.SplitHostPort(hostport)
	if err != nil {
		host, portStr = hostport, defaultPort
	}
	t := target{host: policy.CanonicalHost(host)}
	t.port, err = strconv.Atoi(portStr)
	if err != nil || t.port < 1 || t.port > 65535 {
		return t, fmt.Sprintf("blocked %s://%s — %q is not a port", scheme, host, portStr)
	}
	blocked := func(why string, args ...any) string {
		return fmt.Sprintf("blocked %s://%s:%d — ", scheme, t.host, t.port) + fmt.Sprintf(why, args...)
	}
	if policy.AddressLike(host) || strings.ContainsAny(host, "[]:%") {
		return t, blocked("an IP address; the gateway reaches only host names in this profile's egress allowlist")
	}
	rule, ok := r.p.Lookup(t.host)
	if !ok {
		return t, blocked("not in this profile's egress allowlist")
	}
	t.rule = rule
	if !slices.Contains(rule.EffectivePorts(), t.port) {
		return t, blocked("port %d is not allowed for this host (allowed: %s)", t.port, joinInts(rule.EffectivePorts()))
	}
	if rule.Upstream == policy.UpstreamHTTPS && scheme == "https" {
		return t, blocked("this host is reached as http://%s/ through the gateway, which speaks TLS to it and adds its credentials", t.host)
	}
	if len(rule.Resolve) > 0 {
		for _, s := range rule.Resolve {
			a, err := netip.ParseAddr(s)
			if err == nil {
				t.addrs = append(t.addrs, a)
			}
		}
		return t, ""
	}
	ctx, cancel := context.WithTimeout(r.ctx, r.g.cfg.HandshakeTimeout)
	defer cancel()
	addrs, err := r.g.cfg.Lookup(ctx, t.host)
	if err != nil || len(addrs) == 0 {
		return t, blocked("the name does not resolve")
	}
	var refused []string
	for _, a := range addrs {
		if kind := blockedKind(a); kind != "" {
			refused = append(refused, fmt.Sprintf("%s (%s)", a.Unmap(), kind))
			continue
		}
		t.addrs = append(t.addrs, a.Unmap())
	}
	if len(t.addrs) == 0 {
		return t, blocked("it resolves to %s, which the gateway never reaches unless the operator pins it with resolve", strings.Join(refused, ", "))
	}
	return t, ""
}

func joinInts(ns []int) string {
	s := make([]string, len(ns))
	for i, n := range ns {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ", ")
}

// dial connects to the first of t's addresses that answers.
func (r *Run) dial(t target, port int) (net.Conn, error) {
	var errs []error
	for _, a := range t.addrs {
		c, err := r.g.cfg.Dial(r.ctx, "tcp", netip.AddrPortFrom(a, uint16(port)).String())
		if err == nil {
			return c, nil
		}
		errs = append(errs, err)
	}
	return nil, errors.Join(errs...)
}

func (r *Run) connect(c net.Conn, br *bufio.Reader, req *http.Request, a *attempt) {
	a.e.Scheme = "https"
	t, reason := r.decide("https", req.Host, "443")
	a.e.Host, a.e.Port = t.host, t.port
	if reason != "" {
		r.finish(a, record.NetRefused, reason)
		refuse(c, http.StatusForbidden, reason)
		return
	}
	if _, err := io.WriteString(c, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		return
	}
	// From here on the connection is TLS: a refusal can only close it.
	_ = c.SetReadDeadline(time.Now().Add(r.g.cfg.HandshakeTimeout))
	sni, hello, err := readClientHello(br)
	_ = c.SetReadDeadline(time.Time{})
	switch {
	case err != nil:
		r.finish(a, record.NetRefused, fmt.Sprintf("blocked https://%s:%d — the tunnel did not start with a TLS ClientHello", t.host, t.port))
		return
	case sni == "":
		r.finish(a, record.NetRefused, fmt.Sprintf("blocked https://%s:%d — the ClientHello names no server (SNI)", t.host, t.port))
		return
	case policy.CanonicalHost(sni) != t.host:
		r.finish(a, record.NetRefused, fmt.Sprintf("blocked https://%s:%d — the ClientHello names %q, not the CONNECT host", t.host, t.port, sni))
		return
	}
	up, err := r.dial(t, t.port)
	if err != nil {
		r.finish(a, record.NetRefused, fmt.Sprintf("blocked https://%s:%d — the upstream did not accept the connection", t.host, t.port))
		return
	}
	if !r.track(up) {
		_ = up.Close()
		return
	}
	defer r.untrack(up)
	if !r.countOut(a, int64(len(hello))) {
		r.finish(a, record.NetLimit, r.limitSentence())
		return
	}
	if _, err := up.Write(hello); err != nil {
		r.finish(a, record.NetAllowed, "")
		return
	}
	r.relay(c, br, up, a)
	if r.limitSentence() != "" {
		r.finish(a, record.NetLimit, r.limitSentence())
		return
	}
	r.finish(a, record.NetAllowed, "")
}

func (r *Run) limitSentence() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.limit
}

// countOut charges n bytes from the jail; false if that passes the limit.
func (r *Run) countOut(a *attempt, n int64) bool {
	if r.out.Add(n) > r.limits.MaxBytesOut {
		r.exceed(fmt.Sprintf("network limit: more than %d bytes sent in this run", r.limits.MaxBytesOut))
		return false
	}
	a.out.Add(n)
	return true
}

// countIn charges n bytes to the jail; false if that passes the limit.
func (r *Run) countIn(a *attempt, n int64) bool {
	if r.in.Add(n) > r.limits.MaxBytesIn {
		r.exceed(fmt.Sprintf("network limit: more than %d bytes received in this run", r.limits.MaxBytesIn))
		return false
	}
	a.in.Add(n)
	return true
}

// meter passes bytes through, charging each chunk before it is delivered;
// a chunk that would pass the limit is never delivered.
type meter struct {
	w     io.Writer
	count func(int64) bool
}

func (m meter) Write(p []byte) (int, error) {
	if !m.count(int64(len(p))) {
		return 0, errLimit
	}
	return m.w.Write(p)
}

var errLimit = errors.New("network limit")

// relay copies both ways until either side ends. The jail's half-close
// is passed on, so a client that shuts down writing still gets its
// answer.
func (r *Run) relay(c net.Conn, br *bufio.Reader, up net.Conn, a *attempt) {
	done := make(chan struct{}, 2)
	go func() {
		_, _ = io.Copy(meter{w: up, count: func(n int64) bool { return r.countOut(a, n) }}, br)
		if cw, ok := up.(interface{ CloseWrite() error }); ok {
			_ = cw.CloseWrite()
		}
		done <- struct{}{}
	}()
	go func() {
		_, _ = io.Copy(meter{w: c, count: func(n int64) bool { return r.countIn(a, n) }}, up)
		done <- struct{}{}
	}()
	<-done
	// The upstream finished (or the jail did and the upstream has its
	// half-close): either way the other copy ends when both are closed.
	_ = c.Close()
	_ = up.Close()
	<-done
}

// hopHeaders are removed from every forwarded request: they describe the
// jail-to-gateway hop (RFC 9110 §7.6.1), and Proxy-Authorization must
// never leave the gateway.
var hopHeaders = []string{"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authorization", "Proxy-Authenticate", "Te", "Trailer", "Upgrade"}

func (r *Run) forward(c net.Conn, req *http.Request, a *attempt) {
	a.e.Scheme, a.e.Method = "http", req.Method
	a.e.Path = req.URL.Path
	if len(a.e.Path) > 256 {
		a.e.Path = a.e.Path[:256] + "…"
	}
	t, reason := r.decide("http", req.URL.Host, "80")
	a.e.Host, a.e.Port = t.host, t.port
	if reason != "" {
		r.finish(a, record.NetRefused, reason)
		refuse(c, http.StatusForbidden, reason)
		return
	}
	for _, h := range req.Header.Values("Connection") {
		for name := range strings.SplitSeq(h, ",") {
			req.Header.Del(strings.TrimSpace(name))
		}
	}
	for _, h := range hopHeaders {
		req.Header.Del(h)
	}
	// The Host header follows the URL that was decided, never a header
	// the jail chose; and one request per connection, so nothing the jail
	// appends after the body (a smuggled request) is ever read.
	req.Host = ""
	req.Close = true
	req.RequestURI = ""
	port := t.port
	if t.rule.Upstream == policy.UpstreamHTTPS {
		req.URL.Scheme, req.URL.Host, port = "https", t.host, 443
		for _, in := range t.rule.Inject {
			v, err := r.secret(in)
			if err != nil {
				s := fmt.Sprintf("blocked http://%s:%d — the gateway could not read the credential for header %s", t.host, t.port, in.Header)
				r.finish(a, record.NetRefused, s)
				refuse(c, http.StatusBadGateway, s)
				return
			}
			req.Header.Set(in.Header, in.Prefix+v)
		}
	} else {
		req.URL.Host = net.JoinHostPort(t.host, strconv.Itoa(t.port))
	}
	raw, err := r.dial(t, port)
	if err != nil {
		s := fmt.Sprintf("blocked http://%s:%d — the upstream did not accept the connection", t.host, t.port)
		r.finish(a, record.NetRefused, s)
		refuse(c, http.StatusBadGateway, s)
		return
	}
	if !r.track(raw) {
		_ = raw.Close()
		return
	}
	defer r.untrack(raw)
	up := raw
	if t.rule.Upstream == policy.UpstreamHTTPS {
		tc := tls.Client(raw, &tls.Config{ServerName: t.host, RootCAs: r.g.cfg.RootCAs, MinVersion: tls.VersionTLS12})
		hctx, cancel := context.WithTimeout(r.ctx, r.g.cfg.HandshakeTimeout)
		err := tc.HandshakeContext(hctx)
		cancel()
		if err != nil {
			s := fmt.Sprintf("blocked http://%s:%d — the upstream's TLS certificate did not verify for %s", t.host, t.port, t.host)
			r.finish(a, record.NetRefused, s)
			refuse(c, http.StatusBadGateway, s)
			return
		}
		up = tc
	}
	if err := req.Write(meter{w: up, count: func(n int64) bool { return r.countOut(a, n) }}); err != nil {
		r.finishForward(c, a, t, "the request could not be sent upstream")
		return
	}
	resp, err := http.ReadResponse(bufio.NewReader(up), req)
	if err != nil {
		r.finishForward(c, a, t, "the upstream's answer was not HTTP")
		return
	}
	defer resp.Body.Close()
	resp.Close = true
	for _, h := range hopHeaders {
		resp.Header.Del(h)
	}
	if err := resp.Write(meter{w: c, count: func(n int64) bool { return r.countIn(a, n) }}); err != nil {
		r.finishForward(c, a, t, "")
		return
	}
	r.finish(a, record.NetAllowed, "")
}

// finishForward ends a forwarded request that broke after it was
// allowed: by a limit, or by a failure it names.
func (r *Run) finishForward(c net.Conn, a *attempt, t target, why string) {
	if s := r.limitSentence(); s != "" {
		r.finish(a, record.NetLimit, s)
		return
	}
	if why == "" {
		r.finish(a, record.NetAllowed, "")
		return
	}
	s := fmt.Sprintf("blocked http://%s:%d — %s", t.host, t.port, why)
	r.finish(a, record.NetRefused, s)
	refuse(c, http.StatusBadGateway, s)
}

// secret reads an inject value on the host, now: a rotated file takes
// effect on the next request, and the value lives only in this request.
func (r *Run) secret(in policy.Inject) (string, error) {
	var v string
	if in.Env != "" {
		v = r.g.cfg.Getenv(in.Env)
	} else {
		b, err := r.g.cfg.ReadFile(in.File)
		if err != nil {
			return "", fmt.Errorf("%w: %w", ErrSecret, err)
		}
		v = strings.TrimRight(string(b), "\r\n")
	}
	if v == "" || strings.ContainsAny(v, "\r\n\x00") {
		return "", fmt.Errorf("%w: empty or holds a line break", ErrSecret)
	}
	return v, nil
}
