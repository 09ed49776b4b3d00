package egress

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pyjail/pyjail/policy"
	"github.com/pyjail/pyjail/record"
)

// testCA issues certificates for upstreams on loopback; nothing here
// reaches the internet.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pool *x509.CertPool
}

func newTestCA(t testing.TB) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "pyjail egress test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &testCA{cert: cert, key: key, pool: pool}
}

func (ca *testCA) leaf(t testing.TB, names ...string) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: names[0]}, DNSNames: names,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, KeyUsage: x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// upstream is a loopback HTTPS (or HTTP) server that records what it got.
type upstream struct {
	*httptest.Server
	mu   sync.Mutex
	reqs []*http.Request
}

func (u *upstream) got() []*http.Request {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]*http.Request(nil), u.reqs...)
}

func (u *upstream) port(t testing.TB) int {
	t.Helper()
	ap, err := netip.ParseAddrPort(u.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	return int(ap.Port())
}

// newUpstream serves body on every path; with ca set it speaks TLS with a
// certificate for names.
func newUpstream(t testing.TB, ca *testCA, body []byte, names ...string) *upstream {
	t.Helper()
	u := &upstream{}
	u.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.mu.Lock()
		u.reqs = append(u.reqs, r.Clone(context.Background()))
		u.mu.Unlock()
		_, _ = io.Copy(io.Discard, r.Body)
		_, _ = w.Write(body)
	}))
	if ca != nil {
		u.TLS = &tls.Config{Certificates: []tls.Certificate{ca.leaf(t, names...)}}
		u.StartTLS()
	} else {
		u.Start()
	}
	t.Cleanup(u.Close)
	return u
}

// fixture is a gateway serving one run on a loopback listener.
type fixture struct {
	run   *Run
	addr  string
	mu    sync.Mutex
	dials []string
}

func (f *fixture) dialed() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.dials...)
}

// start serves p. dns answers names without a pin (anything else: no
// such host); redirect sends dials of an address to a loopback port, so
// "public" answers can be played by loopback servers.
func start(t testing.TB, p *policy.Egress, cfg Config, dns map[string][]string, redirect map[string]string) *fixture {
	t.Helper()
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	f := &fixture{}
	cfg.Lookup = func(_ context.Context, host string) ([]netip.Addr, error) {
		var out []netip.Addr
		for _, s := range dns[host] {
			out = append(out, netip.MustParseAddr(s))
		}
		if len(out) == 0 {
			return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
		}
		return out, nil
	}
	d := &net.Dialer{}
	cfg.Dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
		f.mu.Lock()
		f.dials = append(f.dials, addr)
		f.mu.Unlock()
		if to, ok := redirect[addr]; ok {
			addr = to
		}
		return d.DialContext(ctx, network, addr)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f.addr = l.Addr().String()
	f.run = New(cfg).Start(context.Background(), l, p)
	t.Cleanup(func() { f.run.Close() })
	return f
}

// client is the jail's side: a client whose only way out is the gateway.
func (f *fixture) client(roots *x509.CertPool) *http.Client {
	proxy, _ := url.Parse("http://" + f.addr)
	return &http.Client{Transport: &http.Transport{
		Proxy:             http.ProxyURL(proxy),
		TLSClientConfig:   &tls.Config{RootCAs: roots},
		DisableKeepAlives: true,
	}}
}

// raw sends one request to the gateway as written and returns the answer.
func (f *fixture) raw(t testing.TB, req string) (*http.Response, string, net.Conn) {
	t.Helper()
	c, err := net.Dial("tcp", f.addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := io.WriteString(c, req); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, &http.Request{Method: strings.Fields(req)[0]})
	if err != nil {
		t.Fatalf("reading the gateway's answer to %q: %v", req, err)
	}
	if resp.StatusCode == http.StatusOK && strings.HasPrefix(req, "CONNECT") {
		return resp, "", &bufConn{Conn: c, r: br}
	}
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b), c
}

type bufConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *bufConn) Read(p []byte) (int, error) { return c.r.Read(p) }

func pinned(host string, extra ...policy.EgressRule) *policy.Egress {
	return &policy.Egress{Rules: append([]policy.EgressRule{{Host: host, Resolve: []string{"127.0.0.1"}}}, extra...)}
}

func TestAllowedHTTPSThroughPin(t *testing.T) {
	ca := newTestCA(t)
	up := newUpstream(t, ca, []byte("a,b\n1,2\n"), "data.example.test")
	p := pinned("data.example.test")
	p.Rules[0].Ports = []int{up.port(t)}
	f := start(t, p, Config{}, nil, nil)
	resp, err := f.client(ca.pool).Get(fmt.Sprintf("https://data.example.test:%d/x.csv", up.port(t)))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if got, want := string(body), "a,b\n1,2\n"; got != want {
		t.Fatalf("body = %q, want %q", got, want)
	}
	rep := f.run.Close()
	if len(rep.Entries) != 1 {
		t.Fatalf("entries = %+v, want one", rep.Entries)
	}
	e := rep.Entries[0]
	if e.Verdict != record.NetAllowed || e.Scheme != "https" || e.Host != "data.example.test" || e.BytesIn == 0 || e.BytesOut == 0 || rep.Limit != "" {
		t.Errorf("entry = %+v, limit %q", e, rep.Limit)
	}
}

// refusedBefore checks a refusal answered with a 403 sentence and recorded.
func refusedBefore(t *testing.T, f *fixture, req, want string) {
	t.Helper()
	resp, body, _ := f.raw(t, req)
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, want) || strings.Count(strings.TrimSpace(body), "\n") != 0 {
		t.Errorf("%q: %d %q, want 403 with one sentence containing %q", req, resp.StatusCode, body, want)
	}
}

func TestRefusals(t *testing.T) {
	p := &policy.Egress{Rules: []policy.EgressRule{
		{Host: "data.example.test", Ports: []int{443}},
		{Host: "rebind.example.test"},
		{Host: "meta.example.test"},
		{Host: "mapped.example.test"},
		{Host: "api.example.test", Upstream: "https"},
	}}
	dns := map[string][]string{
		"data.example.test":   {"192.0.2.10"}, // TEST-NET-1: never dialed by these cases
		"rebind.example.test": {"127.0.0.1"},
		"meta.example.test":   {"169.254.169.254", "fd00:ec2::254"},
		"mapped.example.test": {"::ffff:10.1.2.3", "::1"},
		"evil.example.test":   {"192.0.2.66"},
	}
	f := start(t, p, Config{}, dns, nil)
	for name, tc := range map[string]struct{ req, want string }{
		"not allowed":         {"CONNECT evil.example.test:443 HTTP/1.1\r\nHost: evil.example.test:443\r\n\r\n", "blocked https://evil.example.test:443 — not in this profile's egress allowlist"},
		"not allowed http":    {"GET http://evil.example.test/ HTTP/1.1\r\nHost: evil.example.test\r\n\r\n", "blocked http://evil.example.test:80 — not in this profile's egress allowlist"},
		"suffix trick":        {"CONNECT data.example.test.evil.test:443 HTTP/1.1\r\nHost: x\r\n\r\n", "not in this profile's egress allowlist"},
		"idna look-alike":     {"CONNECT xn--dta-8cd.example.test:443 HTTP/1.1\r\nHost: x\r\n\r\n", "not in this profile's egress allowlist"},
		"port":                {"CONNECT data.example.test:8443 HTTP/1.1\r\nHost: x\r\n\r\n", "port 8443 is not allowed for this host (allowed: 443)"},
		"http on 443 only":    {"GET http://data.example.test/ HTTP/1.1\r\nHost: x\r\n\r\n", "port 80 is not allowed"},
		"ipv4":                {"CONNECT 127.0.0.1:443 HTTP/1.1\r\nHost: x\r\n\r\n", "an IP address"},
		"ipv4 http":           {"GET http://169.254.169.254/latest/meta-data/ HTTP/1.1\r\nHost: x\r\n\r\n", "an IP address"},
		"ipv6":                {"CONNECT [::1]:443 HTTP/1.1\r\nHost: x\r\n\r\n", "an IP address"},
		"ipv4-mapped":         {"CONNECT [::ffff:127.0.0.1]:443 HTTP/1.1\r\nHost: x\r\n\r\n", "an IP address"},
		"hex":                 {"GET http://0x7f.1/ HTTP/1.1\r\nHost: x\r\n\r\n", "an IP address"},
		"decimal":             {"CONNECT 2130706433:443 HTTP/1.1\r\nHost: x\r\n\r\n", "an IP address"},
		"octal":               {"CONNECT 0177.0.0.1:443 HTTP/1.1\r\nHost: x\r\n\r\n", "an IP address"},
		"localhost dot":       {"CONNECT localhost.:443 HTTP/1.1\r\nHost: x\r\n\r\n", "not in this profile's egress allowlist"},
		"rebind loopback":     {"CONNECT rebind.example.test:443 HTTP/1.1\r\nHost: x\r\n\r\n", "resolves to 127.0.0.1 (loopback)"},
		"rebind metadata":     {"CONNECT meta.example.test:443 HTTP/1.1\r\nHost: x\r\n\r\n", "169.254.169.254 (cloud metadata), fd00:ec2::254 (cloud metadata)"},
		"rebind mapped":       {"GET http://mapped.example.test/ HTTP/1.1\r\nHost: x\r\n\r\n", "10.1.2.3 (private), ::1 (loopback)"},
		"tunnel to broker":    {"CONNECT api.example.test:80 HTTP/1.1\r\nHost: x\r\n\r\n", "reached as http://api.example.test/"},
		"unresolvable":        {"CONNECT nx.example.test:443 HTTP/1.1\r\nHost: x\r\n\r\n", "not in this profile's egress allowlist"},
		"host header spoof":   {"GET http://evil.example.test/ HTTP/1.1\r\nHost: data.example.test\r\n\r\n", "blocked http://evil.example.test:80"},
		"userinfo in connect": {"CONNECT data.example.test@evil.example.test:443 HTTP/1.1\r\nHost: x\r\n\r\n", "not in this profile's egress allowlist"},
	} {
		t.Run(name, func(t *testing.T) { refusedBefore(t, f, tc.req, tc.want) })
	}
	// Not a proxy request at all.
	if resp, body, _ := f.raw(t, "GET / HTTP/1.1\r\nHost: data.example.test\r\n\r\n"); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("origin-form request: %d %q, want 400", resp.StatusCode, body)
	}
	if d := f.dialed(); len(d) != 0 {
		t.Errorf("refused attempts dialed %v", d)
	}
	rep := f.run.Close()
	for _, e := range rep.Entries {
		if e.Verdict != record.NetRefused || e.Reason == "" {
			t.Errorf("entry %+v: want refused with a reason", e)
		}
	}
	if rep.Limit != "" {
		t.Errorf("limit %q", rep.Limit)
	}
}

func TestRebindingDialsOnlyPublicAnswer(t *testing.T) {
	ca := newTestCA(t)
	up := newUpstream(t, ca, []byte("ok"), "mixed.example.test")
	// The name answers loopback and a public address; only the public one
	// is dialed (the test plays it with the loopback server).
	f := start(t, &policy.Egress{Rules: []policy.EgressRule{{Host: "mixed.example.test"}}}, Config{},
		map[string][]string{"mixed.example.test": {"127.0.0.1", "203.0.113.7"}},
		map[string]string{"203.0.113.7:443": up.Listener.Addr().String()})
	resp, err := f.client(ca.pool).Get("https://mixed.example.test/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got := f.dialed(); len(got) != 1 || got[0] != "203.0.113.7:443" {
		t.Errorf("dialed %v, want only 203.0.113.7:443", got)
	}
}

func TestSNIMustNameConnectHost(t *testing.T) {
	ca := newTestCA(t)
	up := newUpstream(t, ca, []byte("secret data"), "data.example.test", "evil.example.test")
	p := pinned("data.example.test")
	p.Rules[0].Ports = []int{up.port(t)}
	f := start(t, p, Config{}, nil, nil)
	for name, sni := range map[string]string{"other host": "evil.example.test", "no sni": ""} {
		t.Run(name, func(t *testing.T) {
			_, _, c := f.raw(t, fmt.Sprintf("CONNECT data.example.test:%d HTTP/1.1\r\nHost: x\r\n\r\n", up.port(t)))
			tc := tls.Client(c, &tls.Config{ServerName: sni, RootCAs: ca.pool, InsecureSkipVerify: sni == ""})
			if err := tc.Handshake(); err == nil {
				t.Fatalf("TLS with SNI %q through a CONNECT to data.example.test completed", sni)
			}
		})
	}
	// Not TLS at all inside the tunnel.
	_, _, c := f.raw(t, fmt.Sprintf("CONNECT data.example.test:%d HTTP/1.1\r\nHost: x\r\n\r\n", up.port(t)))
	_, _ = io.WriteString(c, "GET / HTTP/1.1\r\nHost: data.example.test\r\n\r\n")
	if b, _ := io.ReadAll(c); len(b) != 0 {
		t.Errorf("plain HTTP in a tunnel got %q", b)
	}
	rep := f.run.Close()
	if len(up.got()) != 0 {
		t.Errorf("the upstream saw %d requests", len(up.got()))
	}
	var reasons []string
	for _, e := range rep.Entries {
		reasons = append(reasons, e.Reason)
	}
	joined := strings.Join(reasons, "\n")
	for _, want := range []string{`the ClientHello names "evil.example.test", not the CONNECT host`, "names no server (SNI)", "did not start with a TLS ClientHello"} {
		if !strings.Contains(joined, want) {
			t.Errorf("reasons %q lack %q", joined, want)
		}
	}
}

func TestByteLimitEndsRun(t *testing.T) {
	ca := newTestCA(t)
	big := []byte(strings.Repeat("x", 1<<20))
	up := newUpstream(t, ca, big, "data.example.test")
	p := pinned("data.example.test")
	p.Rules[0].Ports = []int{up.port(t)}
	p.Limits = policy.EgressLimits{MaxBytesIn: 100 << 10}
	f := start(t, p, Config{}, nil, nil)
	resp, err := f.client(ca.pool).Get(fmt.Sprintf("https://data.example.test:%d/big", up.port(t)))
	if err == nil {
		n, _ := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if n >= int64(len(big)) {
			t.Fatalf("read all %d bytes past a %d byte limit", n, p.Limits.MaxBytesIn)
		}
	}
	<-f.run.Exceeded()
	rep := f.run.Close()
	if !strings.Contains(rep.Limit, "more than 102400 bytes received") {
		t.Errorf("limit = %q", rep.Limit)
	}
	if len(rep.Entries) != 1 || rep.Entries[0].Verdict != record.NetLimit || rep.Entries[0].BytesIn > p.Limits.MaxBytesIn {
		t.Errorf("entries = %+v", rep.Entries)
	}
}

func TestBytesOutLimit(t *testing.T) {
	up := newUpstream(t, nil, []byte("ok"), "")
	p := pinned("up.example.test")
	p.Rules[0].Ports = []int{up.port(t)}
	p.Limits = policy.EgressLimits{MaxBytesOut: 4 << 10}
	f := start(t, p, Config{}, nil, nil)
	_, err := f.client(nil).Post(fmt.Sprintf("http://up.example.test:%d/upload", up.port(t)), "text/plain", strings.NewReader(strings.Repeat("y", 64<<10)))
	if err == nil {
		t.Log("the client saw an answer; the limit must still be recorded")
	}
	<-f.run.Exceeded()
	if rep := f.run.Close(); !strings.Contains(rep.Limit, "more than 4096 bytes sent") {
		t.Errorf("limit = %q", rep.Limit)
	}
}

func TestConnectionLimit(t *testing.T) {
	p := &policy.Egress{Rules: []policy.EgressRule{{Host: "data.example.test"}}, Limits: policy.EgressLimits{MaxConnections: 2}}
	f := start(t, p, Config{}, nil, nil)
	for range 2 {
		refusedBefore(t, f, "CONNECT evil.example.test:443 HTTP/1.1\r\nHost: x\r\n\r\n", "not in this profile's egress allowlist")
	}
	refusedBefore(t, f, "CONNECT evil.example.test:443 HTTP/1.1\r\nHost: x\r\n\r\n", "more than 2 connections")
	<-f.run.Exceeded()
	// After the limit, the gateway accepts nothing more for this run.
	if c, err := net.Dial("tcp", f.addr); err == nil {
		_, _ = io.WriteString(c, "CONNECT data.example.test:443 HTTP/1.1\r\nHost: x\r\n\r\n")
		if b, _ := io.ReadAll(c); len(b) != 0 {
			t.Errorf("a connection after the limit got %q", b)
		}
		c.Close()
	}
	rep := f.run.Close()
	if got := rep.Entries[len(rep.Entries)-1].Verdict; got != record.NetLimit {
		t.Errorf("last verdict %q", got)
	}
}

// TestInjectedCredential: the gateway adds the key on its own TLS hop to
// the configured host; the jail's request carries none, the answer holds
// none, and no other host gets it.
func TestInjectedCredential(t *testing.T) {
	const secret = "sk-test-0123456789"
	ca := newTestCA(t)
	api := newUpstream(t, ca, []byte(`{"ok":true}`), "api.example.test")
	echo := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = r.Header.Write(w) // an upstream the jail controls, echoing all it got
	}))
	t.Cleanup(echo.Close)
	echoPort := netip.MustParseAddrPort(echo.Listener.Addr().String()).Port()
	p := &policy.Egress{Rules: []policy.EgressRule{
		{Host: "api.example.test", Upstream: "https", Resolve: []string{"192.0.2.1"},
			Inject: []policy.Inject{{Header: "Authorization", Env: "PYJAIL_TEST_KEY", Prefix: "Bearer "}}},
		{Host: "echo.example.test", Ports: []int{int(echoPort)}, Resolve: []string{"127.0.0.1"}},
	}}
	f := start(t, p, Config{RootCAs: ca.pool, Getenv: func(k string) string {
		if k == "PYJAIL_TEST_KEY" {
			return secret
		}
		return ""
	}}, nil, map[string]string{"192.0.2.1:443": api.Listener.Addr().String()})
	req, _ := http.NewRequest(http.MethodGet, "http://api.example.test/v1/models", nil)
	req.Header.Set("Authorization", "Bearer jail-chosen")
	req.Header.Set("Proxy-Authorization", "Basic amFpbDpwdw==")
	resp, err := f.client(nil).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || string(body) != `{"ok":true}` {
		t.Fatalf("answer %d %q", resp.StatusCode, body)
	}
	got := api.got()
	if len(got) != 1 || got[0].Header.Get("Authorization") != "Bearer "+secret || got[0].Host != "api.example.test" || got[0].Header.Get("Proxy-Authorization") != "" {
		t.Fatalf("upstream got %+v", got)
	}
	var all strings.Builder
	_ = resp.Header.Write(&all)
	all.Write(body)
	// The other host: its echo must hold neither the secret nor the
	// jail's proxy credentials; the Host header follows the URL.
	resp, err = f.client(nil).Get(fmt.Sprintf("http://echo.example.test:%d/", echoPort))
	if err != nil {
		t.Fatal(err)
	}
	echoed, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	all.Write(echoed)
	if strings.Contains(all.String(), secret) {
		t.Errorf("the secret reached the jail: %q", all.String())
	}
	if strings.Contains(string(echoed), "Proxy-Authorization") {
		t.Errorf("Proxy-Authorization left the gateway: %q", echoed)
	}
	rep := f.run.Close()
	for _, e := range rep.Entries {
		if strings.Contains(fmt.Sprint(e), secret) {
			t.Errorf("entry holds the secret: %+v", e)
		}
	}
}

func TestInjectFailsClosed(t *testing.T) {
	ca := newTestCA(t)
	api := newUpstream(t, ca, []byte("x"), "api.example.test")
	p := &policy.Egress{Rules: []policy.EgressRule{{Host: "api.example.test", Upstream: "https", Resolve: []string{"127.0.0.1"},
		Inject: []policy.Inject{{Header: "X-Api-Key", File: "/nonexistent/key"}}}}}
	f := start(t, p, Config{RootCAs: ca.pool}, nil, map[string]string{"127.0.0.1:443": api.Listener.Addr().String()})
	resp, err := f.client(nil).Get("http://api.example.test/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadGateway || len(api.got()) != 0 {
		t.Errorf("status %d, upstream saw %d requests; want 502 and none", resp.StatusCode, len(api.got()))
	}
}

func TestUpstreamCertificateVerified(t *testing.T) {
	ca, other := newTestCA(t), newTestCA(t)
	api := newUpstream(t, other, []byte("x"), "api.example.test")
	p := &policy.Egress{Rules: []policy.EgressRule{{Host: "api.example.test", Upstream: "https", Resolve: []string{"127.0.0.1"}}}}
	f := start(t, p, Config{RootCAs: ca.pool}, nil, map[string]string{"127.0.0.1:443": api.Listener.Addr().String()})
	resp, err := f.client(nil).Get("http://api.example.test/")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadGateway || !strings.Contains(string(b), "did not verify") {
		t.Errorf("%d %q, want 502 naming the certificate", resp.StatusCode, b)
	}
}

// TestSmuggling: a request with both Content-Length and chunked framing,
// followed by a second request on the same connection, reaches the
// upstream as one request, and the second is never read.
func TestSmuggling(t *testing.T) {
	up := newUpstream(t, nil, []byte("ok"), "")
	port := up.port(t)
	p := pinned("up.example.test")
	p.Rules[0].Ports = []int{port}
	f := start(t, p, Config{}, map[string][]string{"evil.example.test": {"127.0.0.1"}}, nil)
	smuggled := fmt.Sprintf("POST http://up.example.test:%d/a HTTP/1.1\r\nHost: up.example.test\r\nContent-Length: 44\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET http://evil.example.test/ HTTP/1.1\r\nHost: x\r\n\r\n", port)
	resp, _, _ := f.raw(t, smuggled)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	rep := f.run.Close()
	if got := up.got(); len(got) != 1 || got[0].URL.Path != "/a" {
		t.Errorf("upstream got %d requests", len(got))
	}
	if len(rep.Entries) != 1 {
		t.Errorf("entries %+v: the smuggled request was read", rep.Entries)
	}
}

// TestNarrowedTenant: a tenant whose entry narrows the profile to one
// host reaches that host and not its siblings.
func TestNarrowedTenant(t *testing.T) {
	base := &policy.Egress{Rules: []policy.EgressRule{{Host: "*.example.test"}}}
	narrow, err := base.Narrow([]string{"data.example.test"})
	if err != nil {
		t.Fatal(err)
	}
	f := start(t, narrow, Config{}, map[string][]string{"other.example.test": {"192.0.2.3"}}, nil)
	refusedBefore(t, f, "CONNECT other.example.test:443 HTTP/1.1\r\nHost: x\r\n\r\n", "not in this profile's egress allowlist")
}

func TestBlockedKind(t *testing.T) {
	for addr, want := range map[string]string{
		"127.0.0.1": "loopback", "127.8.9.10": "loopback", "::1": "loopback", "::ffff:127.0.0.1": "loopback",
		"10.0.0.1": "private", "172.16.5.4": "private", "172.31.255.255": "private", "192.168.1.1": "private",
		"fc00::1": "private", "fd12::1": "private", "169.254.169.254": "cloud metadata", "169.254.1.1": "link-local",
		"fe80::1": "link-local", "100.64.0.1": "carrier-grade NAT", "100.127.255.255": "carrier-grade NAT",
		"224.0.0.1": "multicast", "ff02::1": "multicast", "0.0.0.0": "unspecified", "::": "unspecified",
		"::ffff:169.254.169.254": "cloud metadata", "64:ff9b::7f00:1": "NAT64", "2002:7f00:1::": "6to4",
		"255.255.255.255": "reserved",
		"1.1.1.1":         "", "93.184.216.34": "", "172.32.0.1": "", "100.128.0.1": "", "2606:4700::1111": "",
	} {
		if got := blockedKind(netip.MustParseAddr(addr)); got != want {
			t.Errorf("blockedKind(%s) = %q, want %q", addr, got, want)
		}
	}
}

// loopbackDial dials addr whatever the name asked for.
func (f *fixture) loopbackDial(addr string) func(context.Context, string, string) (net.Conn, error) {
	var d net.Dialer
	return func(ctx context.Context, network, _ string) (net.Conn, error) {
		return d.DialContext(ctx, network, addr)
	}
}
