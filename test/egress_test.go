//go:build linux

package integration

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pyjail/pyjail/egress"
	"github.com/pyjail/pyjail/jail"
	"github.com/pyjail/pyjail/policy"
	"github.com/pyjail/pyjail/record"
)

// egressCA is the test CA of the loopback upstreams; nothing here reaches
// the internet.
type egressCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  string
	pool *x509.CertPool
}

func newEgressCA(t *testing.T) *egressCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "pyjail egress integration CA"},
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
	return &egressCA{cert: cert, key: key, pool: pool, pem: string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))}
}

// serve starts a loopback HTTPS server for names; handler sees every
// request.
func (ca *egressCA) serve(t *testing.T, handler http.HandlerFunc, names ...string) (port int) {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: names[0]}, DNSNames: names,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, KeyUsage: x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(handler)
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return int(netip.MustParseAddrPort(srv.Listener.Addr().String()).Port())
}

// egressJail is a jail whose "net" profile (layer none, no workspace) has
// the egress policy p, served by a gateway that trusts ca and reads inject
// values from env. A nil gateway makes one without egress support.
func egressJail(t *testing.T, p *policy.Egress, gw *egress.Gateway) *jail.Jail {
	t.Helper()
	return egressJailLayer(t, policy.LayerNone, p, gw)
}

func egressJailLayer(t *testing.T, layer policy.PythonLayer, p *policy.Egress, gw *egress.Gateway) *jail.Jail {
	t.Helper()
	e := sharedEnv(t)
	cfg := e.cfg
	cfg.Profiles = map[record.Profile]policy.Profile{}
	for k, v := range e.cfg.Profiles {
		cfg.Profiles[k] = v
	}
	cfg.Profiles["net"] = policy.Profile{Name: "net", Python: layer, Limits: policy.DefaultLimits(), Egress: p}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	j, err := jail.New(t.Context(), jail.Config{Policy: cfg, Rootfs: e.layout, Egress: gw})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		j.Wait()
		if left := leftovers(e); len(left) > 0 {
			t.Errorf("left behind: %v", left)
		}
	})
	return j
}

func netRun(t *testing.T, j *jail.Jail, code string, opts ...func(*record.Request)) *record.Result {
	t.Helper()
	req := record.Request{Profile: "net", Code: code, Timeout: 30 * time.Second}
	for _, o := range opts {
		o(&req)
	}
	res, err := j.Run(t.Context(), req)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	return res
}

// TestEgress is issue 22 end to end: a jail reaches an allowed HTTPS host
// through the gateway with urllib and pandas; everything else it tries,
// on the gateway or around it, gets nothing; a brokered credential
// reaches its upstream and nothing the jail can read.
func TestEgress(t *testing.T) {
	requireRoot(t)
	const secret = "sk-integration-7f3a9c"
	ca := newEgressCA(t)
	dataPort := ca.serve(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "k,v\na,1\nb,2\na,3\n")
	}, "data.example.test", "evil.example.test")
	var mu sync.Mutex
	var apiAuth []string
	apiPort := ca.serve(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		apiAuth = append(apiAuth, r.Header.Get("Authorization"))
		mu.Unlock()
		_, _ = io.WriteString(w, `{"models": ["m1"]}`)
	}, "api.example.test")
	gw := egress.New(egress.Config{
		RootCAs: ca.pool,
		Getenv: func(k string) string {
			if k == "PYJAIL_TEST_API_KEY" {
				return secret
			}
			return ""
		},
		// The api rule's pin is a documentation address; the test plays
		// it with the loopback server.
		Dial: func(ctx context.Context, network, addr string) (net.Conn, error) {
			if addr == "192.0.2.44:443" {
				addr = fmt.Sprintf("127.0.0.1:%d", apiPort)
			}
			var d net.Dialer
			return d.DialContext(ctx, network, addr)
		},
	})
	p := &policy.Egress{Rules: []policy.EgressRule{
		{Host: "data.example.test", Ports: []int{dataPort}, Resolve: []string{"127.0.0.1"}},
		{Host: "api.example.test", Upstream: "https", Resolve: []string{"192.0.2.44"},
			Inject: []policy.Inject{{Header: "Authorization", Env: "PYJAIL_TEST_API_KEY", Prefix: "Bearer "}}},
	}}
	j := egressJail(t, p, gw)
	code := fmt.Sprintf(`
import json, os, socket, ssl, urllib.request
CA = %q
out = {}
def attempt(f):
    try:
        r = f()
        return 'reached: %%r' %% (r,)
    except Exception as e:
        return type(e).__name__ + ': ' + str(e)
ctx = ssl.create_default_context(cadata=CA)
out['get'] = urllib.request.urlopen('https://data.example.test:%d/x.csv', context=ctx, timeout=10).read().decode()
open('/tmp/ca.pem', 'w').write(CA)
os.environ['SSL_CERT_FILE'] = '/tmp/ca.pem'
import pandas as pd
out['pandas'] = pd.read_csv('https://data.example.test:%d/x.csv').groupby('k')['v'].sum().to_dict()
out['evil'] = attempt(lambda: urllib.request.urlopen('https://evil.example.test:%d/', context=ctx, timeout=10).read())
out['api'] = urllib.request.urlopen('http://api.example.test/v1/models', timeout=10).read().decode()
out['tcp_loopback'] = attempt(lambda: socket.create_connection(('127.0.0.1', %d), timeout=3))
out['tcp_host'] = attempt(lambda: socket.create_connection(('192.0.2.2', %d), timeout=3))
out['udp_dns'] = attempt(lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b'x', ('8.8.8.8', 53)))
out['resolver'] = attempt(lambda: socket.getaddrinfo('example.com', 443))
out['raw'] = attempt(lambda: socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP))
out['netlink'] = attempt(lambda: socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0))
out['packet'] = attempt(lambda: socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0))
out['ifaces'] = [l.split(':')[0].strip() for l in open('/proc/net/dev').read().splitlines()[2:]]
def via_gateway(req):
    s = socket.create_connection(('127.0.0.1', 3128), timeout=5)
    s.sendall(req)
    return s.recv(4096).decode(errors='replace')
out['ip_literal'] = via_gateway(b'CONNECT 127.0.0.1:%d HTTP/1.1\r\nHost: x\r\n\r\n')
out['hex_literal'] = via_gateway(b'GET http://0x7f.1/ HTTP/1.1\r\nHost: x\r\n\r\n')
dump = dict(os.environ)
for p in ['/proc/self/environ', '/proc/1/environ', '/proc/self/cmdline']:
    try:
        dump[p] = open(p, 'rb').read().decode('latin1')
    except Exception as e:
        dump[p] = str(e)
out['dump'] = dump
print(json.dumps(out))
`, ca.pem, dataPort, dataPort, dataPort, dataPort, dataPort, dataPort)
	res := netRun(t, j, code)
	if res.Verdict != record.VerdictOK {
		t.Fatalf("run: %s", describe(res))
	}
	if strings.Contains(res.Stdout, secret) || strings.Contains(res.Stderr, secret) {
		t.Errorf("the injected secret is readable in the jail: %s", res.Stdout)
	}
	var out map[string]any
	if err := json.Unmarshal([]byte(res.Stdout), &out); err != nil {
		t.Fatalf("output %q: %v", res.Stdout, err)
	}
	if got, want := out["get"], "k,v\na,1\nb,2\na,3\n"; got != want {
		t.Errorf("urllib GET = %q, want %q", got, want)
	}
	if got := fmt.Sprint(out["pandas"]); got != "map[a:4 b:2]" {
		t.Errorf("pandas.read_csv(url) = %s", got)
	}
	if got := fmt.Sprint(out["api"]); got != `{"models": ["m1"]}` {
		t.Errorf("brokered API answer = %q", got)
	}
	for _, k := range []string{"evil", "tcp_loopback", "tcp_host", "udp_dns", "resolver", "raw", "netlink", "packet"} {
		if s := fmt.Sprint(out[k]); strings.HasPrefix(s, "reached") {
			t.Errorf("%s: %s", k, s)
		}
	}
	if s := fmt.Sprint(out["evil"]); !strings.Contains(s, "403") {
		t.Errorf("disallowed host: %s, want the gateway's 403", s)
	}
	for _, k := range []string{"ip_literal", "hex_literal"} {
		if s := fmt.Sprint(out[k]); !strings.Contains(s, "403") || !strings.Contains(s, "an IP address") {
			t.Errorf("%s through the gateway: %q", k, s)
		}
	}
	if got := fmt.Sprint(out["ifaces"]); got != "[lo]" {
		t.Errorf("interfaces = %s, want only lo", got)
	}
	mu.Lock()
	if len(apiAuth) != 1 || apiAuth[0] != "Bearer "+secret {
		t.Errorf("the api upstream got Authorization %q", apiAuth)
	}
	mu.Unlock()
	var reasons []string
	allowed := 0
	for _, e := range res.Network {
		if e.Verdict == record.NetAllowed {
			allowed++
		}
		reasons = append(reasons, e.Reason)
	}
	if allowed != 3 {
		t.Errorf("%d allowed entries in %+v, want 3 (urllib, pandas, api)", allowed, res.Network)
	}
	if all := strings.Join(reasons, "\n"); !strings.Contains(all, "blocked https://evil.example.test:") || !strings.Contains(all, "not in this profile's egress allowlist") {
		t.Errorf("refusals %q lack the disallowed host's sentence", all)
	}
}

// TestEgressByteLimit: a download past the run's byte cap ends the run
// with network_limit.
func TestEgressByteLimit(t *testing.T) {
	requireRoot(t)
	ca := newEgressCA(t)
	big := strings.Repeat("x", 4<<20)
	port := ca.serve(t, func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, big) }, "big.example.test")
	p := &policy.Egress{
		Rules:  []policy.EgressRule{{Host: "big.example.test", Ports: []int{port}, Resolve: []string{"127.0.0.1"}}},
		Limits: policy.EgressLimits{MaxBytesIn: 256 << 10},
	}
	j := egressJail(t, p, egress.New(egress.Config{}))
	res := netRun(t, j, fmt.Sprintf(`
import ssl, urllib.request, time
ctx = ssl.create_default_context(cadata=%q)
try:
    urllib.request.urlopen('https://big.example.test:%d/', context=ctx, timeout=10).read()
except Exception as e:
    print('read failed:', e)
time.sleep(20)
print('still running')
`, ca.pem, port))
	if res.Verdict != record.VerdictNetworkLimit || !strings.Contains(res.Message, "bytes received") || strings.Contains(res.Stdout, "still running") {
		t.Fatalf("want network_limit: %s", describe(res))
	}
}

// TestEgressNarrowedTenant: a request narrowed to one host of a wildcard
// rule reaches nothing else, and a narrowing that would widen fails.
func TestEgressNarrowedTenant(t *testing.T) {
	requireRoot(t)
	p := &policy.Egress{Rules: []policy.EgressRule{{Host: "*.example.test", Resolve: []string{"192.0.2.9"}}}}
	j := egressJail(t, p, egress.New(egress.Config{}))
	res := netRun(t, j, `
import socket
s = socket.create_connection(('127.0.0.1', 3128), timeout=5)
s.sendall(b'CONNECT data.example.test:443 HTTP/1.1\r\nHost: x\r\n\r\n')
print(s.recv(4096).decode())
`, func(r *record.Request) { r.EgressHosts = []string{"other.example.test"} })
	if res.Verdict != record.VerdictOK || !strings.Contains(res.Stdout, "403") || !strings.Contains(res.Stdout, "not in this profile's egress allowlist") {
		t.Fatalf("narrowed tenant reached a host outside its list: %s", describe(res))
	}
	_, err := j.Run(t.Context(), record.Request{Profile: "net", Code: "print(1)", EgressHosts: []string{"example.org"}})
	if err == nil || !strings.Contains(err.Error(), "never widen") {
		t.Errorf("widening narrowing: %v", err)
	}
}

// TestEgressFailsClosed: a profile with egress on a jail without a gateway
// refuses to run.
func TestEgressFailsClosed(t *testing.T) {
	requireRoot(t)
	j := egressJail(t, &policy.Egress{Rules: []policy.EgressRule{{Host: "data.example.test"}}}, nil)
	_, err := j.Run(t.Context(), record.Request{Profile: "net", Code: "print(1)"})
	if !errors.Is(err, jail.ErrNoGateway) {
		t.Fatalf("Run without a gateway: %v, want ErrNoGateway", err)
	}
}

// TestNoEgressProfileHasNoListener: a profile without egress has nothing
// on the gateway's port and lo stays down.
func TestNoEgressProfileHasNoListener(t *testing.T) {
	e := sharedEnv(t)
	res := e.run(t, record.ProfileFull, `
import socket
try:
    socket.create_connection(('127.0.0.1', 3128), timeout=3)
    print('reached')
except OSError as e:
    print('refused', e.errno)
`)
	if res.Verdict != record.VerdictOK || !strings.HasPrefix(strings.TrimSpace(res.Stdout), "refused") || res.Network != nil {
		t.Fatalf("%s", describe(res))
	}
}

// TestEgressForked: a jail forked from a fork server has its own network
// namespace, and the gateway's socket is opened in it, not in the
// server's.
func TestEgressForked(t *testing.T) {
	requireRoot(t)
	ca := newEgressCA(t)
	port := ca.serve(t, func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "forked ok") }, "data.example.test")
	e := sharedEnv(t)
	cfg := e.cfg
	cfg.Profiles = map[record.Profile]policy.Profile{}
	for k, v := range e.cfg.Profiles {
		cfg.Profiles[k] = v
	}
	cfg.Profiles["net"] = policy.Profile{
		Name: "net", Python: policy.LayerNone, Limits: policy.DefaultLimits(),
		Warm:   policy.Warm{Size: 1, Refill: 1, ForkServer: true, MemoryBudgetBytes: 1 << 30, Preload: []string{"ssl", "urllib.request"}},
		Egress: &policy.Egress{Rules: []policy.EgressRule{{Host: "data.example.test", Ports: []int{port}, Resolve: []string{"127.0.0.1"}}}},
	}
	j, err := jail.New(t.Context(), jail.Config{Policy: cfg, Rootfs: e.layout, Egress: egress.New(egress.Config{})})
	if err != nil {
		t.Fatal(err)
	}
	pool := jail.NewPool(j, "")
	t.Cleanup(func() {
		pool.Close()
		j.Wait()
		if left := leftovers(e); len(left) > 0 {
			t.Errorf("left behind: %v", left)
		}
	})
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	if err := pool.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	code := fmt.Sprintf(`
import ssl, urllib.request
ctx = ssl.create_default_context(cadata=%q)
print(urllib.request.urlopen('https://data.example.test:%d/', context=ctx, timeout=10).read().decode())
`, ca.pem, port)
	for i := range 2 {
		res, err := pool.Run(t.Context(), record.Request{Profile: "net", Code: code, Timeout: 30 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		if res.Verdict != record.VerdictOK || strings.TrimSpace(res.Stdout) != "forked ok" || !res.Warm || len(res.Network) != 1 {
			t.Fatalf("run %d in a forked jail (start %q): %s network=%+v", i, res.Start, describe(res), res.Network)
		}
	}
}

// TestEgressCalcLayer: in a calc profile with egress, urllib and ssl are
// importable and reach an allowed host; os and subprocess stay denied.
func TestEgressCalcLayer(t *testing.T) {
	requireRoot(t)
	ca := newEgressCA(t)
	port := ca.serve(t, func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "x,y\n1,2\n") }, "data.example.test")
	p := &policy.Egress{Rules: []policy.EgressRule{{Host: "data.example.test", Ports: []int{port}, Resolve: []string{"127.0.0.1"}}}}
	j := egressJailLayer(t, policy.LayerCalc, p, egress.New(egress.Config{}))
	res := netRun(t, j, fmt.Sprintf(`
import ssl
import urllib.request
ctx = ssl.create_default_context(cadata=%q)
print(urllib.request.urlopen('https://data.example.test:%d/', context=ctx, timeout=10).read().decode().split())
`, ca.pem, port))
	if res.Verdict != record.VerdictOK || strings.TrimSpace(res.Stdout) != "['x,y', '1,2']" {
		t.Fatalf("calc layer with egress: %s", describe(res))
	}
	for _, code := range []string{"import os", "import subprocess", "import ftplib"} {
		if res := netRun(t, j, code); res.Verdict != record.VerdictRejected && res.Verdict != record.VerdictError {
			t.Errorf("%q in calc with egress: %s", code, describe(res))
		}
	}
}

// TestEgressEscapeCorpus runs the probes of testdata/escapes_egress (issue
// 22) in a profile with egress: each aims at the gateway, or around it,
// for something the policy does not allow, and must get nothing (a probe
// that gets through prints ESCAPED). The gateway's answers are recorded
// and must all be refusals.
func TestEgressEscapeCorpus(t *testing.T) {
	requireRoot(t)
	files, err := filepath.Glob("testdata/escapes_egress/*.py")
	if err != nil || len(files) < 15 {
		t.Fatalf("egress escape corpus: %d files (%v)", len(files), err)
	}
	dns := map[string]string{"rebind.example.test": "127.0.0.1", "meta.example.test": "169.254.169.254", "evil.example.test": "192.0.2.66"}
	gw := egress.New(egress.Config{Lookup: func(_ context.Context, host string) ([]netip.Addr, error) {
		if a, ok := dns[host]; ok {
			return []netip.Addr{netip.MustParseAddr(a)}, nil
		}
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}})
	p := &policy.Egress{Rules: []policy.EgressRule{
		{Host: "allowed.example.test", Resolve: []string{"127.0.0.1"}},
		{Host: "rebind.example.test"},
		{Host: "meta.example.test"},
	}}
	j := egressJail(t, p, gw)
	// The control: the same probe aimed at what the policy allows must
	// get through, or the corpus could not fail.
	t.Run("control", func(t *testing.T) {
		code, err := os.ReadFile("testdata/escapes_egress/ip_decimal.py")
		if err != nil {
			t.Fatal(err)
		}
		allowed := strings.Replace(string(code), "CONNECT 2130706433:443", "CONNECT allowed.example.test:443", 1)
		if res := netRun(t, j, allowed); !strings.Contains(res.Stdout, "ESCAPED") {
			t.Fatalf("an allowed CONNECT was not seen as getting through: %s", describe(res))
		}
	})
	for _, f := range files {
		code, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		t.Run(strings.TrimSuffix(filepath.Base(f), ".py"), func(t *testing.T) {
			res := netRun(t, j, string(code))
			if res.Verdict != record.VerdictOK || strings.Contains(res.Stdout, "ESCAPED") {
				t.Fatalf("%s", describe(res))
			}
			for _, e := range res.Network {
				if e.Verdict == record.NetAllowed {
					t.Errorf("the gateway allowed %+v", e)
				}
			}
		})
	}
}

// TestEgressSession: egress inside a stateful session. Each call is
// served by a gateway run of its own: its record lists only its own
// attempts, and the state (an opener made in the first call) lives on.
func TestEgressSession(t *testing.T) {
	requireRoot(t)
	ca := newEgressCA(t)
	port := ca.serve(t, func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "session ok") }, "data.example.test")
	e := sharedEnv(t)
	cfg := e.cfg
	cfg.Profiles = map[record.Profile]policy.Profile{}
	for k, v := range e.cfg.Profiles {
		cfg.Profiles[k] = v
	}
	cfg.Profiles["net"] = policy.Profile{
		Name: "net", Python: policy.LayerCalc, Limits: policy.DefaultLimits(),
		Warm:   policy.Warm{ForkServer: true, MemoryBudgetBytes: 1 << 30, Preload: []string{"ssl", "urllib.request"}},
		Egress: &policy.Egress{Rules: []policy.EgressRule{{Host: "data.example.test", Ports: []int{port}, Resolve: []string{"127.0.0.1"}}}},
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	j, err := jail.New(t.Context(), jail.Config{Policy: cfg, Rootfs: e.layout, Egress: egress.New(egress.Config{})})
	if err != nil {
		t.Fatal(err)
	}
	pool := jail.NewPool(j, "")
	t.Cleanup(func() {
		pool.Close()
		j.Wait()
		if left := leftovers(e); len(left) > 0 {
			t.Errorf("left behind: %v", left)
		}
	})
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	if err := pool.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	key := sessionKey(t, "egress")
	call := func(code string) *record.Result {
		t.Helper()
		res, err := pool.Run(t.Context(), record.Request{Profile: "net", Code: code, Timeout: 30 * time.Second, Session: key})
		if err != nil {
			t.Fatal(err)
		}
		if res.Session == nil {
			t.Fatalf("no session state: %s", describe(res))
		}
		return res
	}
	res := call(fmt.Sprintf(`
import ssl, urllib.request
ctx = ssl.create_default_context(cadata=%q)
url = 'https://data.example.test:%d/'
print(urllib.request.urlopen(url, context=ctx, timeout=10).read().decode())
`, ca.pem, port))
	if res.Verdict != record.VerdictOK || strings.TrimSpace(res.Stdout) != "session ok" || len(res.Network) != 1 || res.Network[0].Verdict != record.NetAllowed {
		t.Fatalf("first call: %s network=%+v", describe(res), res.Network)
	}
	res = call(`
print(urllib.request.urlopen(url, context=ctx, timeout=10).read().decode())
try:
    urllib.request.urlopen('https://evil.example.test/', context=ctx, timeout=10)
    print('ESCAPED')
except Exception as e:
    print('refused', type(e).__name__)
`)
	if res.Verdict != record.VerdictOK || res.Session.State != record.SessionPreserved || !strings.HasPrefix(res.Stdout, "session ok\nrefused") {
		t.Fatalf("second call: %s", describe(res))
	}
	// Its own two attempts, in the order they ended: the allowed one's
	// connection may close after the refusal.
	allowed, refused := 0, 0
	for _, n := range res.Network {
		switch {
		case n.Verdict == record.NetAllowed:
			allowed++
		case n.Verdict == record.NetRefused && strings.Contains(n.Reason, "not in this profile's egress allowlist"):
			refused++
		}
	}
	if len(res.Network) != 2 || allowed != 1 || refused != 1 {
		t.Errorf("second call's network (its own attempts only): %+v", res.Network)
	}
}
