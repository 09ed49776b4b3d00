package main

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strings"
	"time"

	"github.com/pyjail/pyjail/egress"
	"github.com/pyjail/pyjail/policy"
)

// egressLayer reports the egress gateway: which profiles open the
// network and to which hosts, whether a gateway built as serve builds it
// decides a request (a self-test on this host's loopback: a CONNECT to a
// host no policy allows must get its 403 sentence, and nothing is
// dialed), and whether every inject source is readable (its value is
// never shown). Without an egress profile it is off and fine.
func egressLayer(ctx context.Context, cfg policy.Config) policy.Layer {
	l := policy.Layer{Name: "egress_gateway", Required: false}
	var profiles []string
	var problems []string
	for _, name := range cfg.ProfileNames() {
		e := cfg.Profiles[name].Egress
		if e == nil {
			continue
		}
		lim := e.Limits.Effective()
		profiles = append(profiles, fmt.Sprintf("%s → %s (per run: %d connections, %s in, %s out)", name, strings.Join(e.Hosts(), ", "),
			lim.MaxConnections, policy.FormatBytes(lim.MaxBytesIn), policy.FormatBytes(lim.MaxBytesOut)))
		for _, r := range e.Rules {
			for _, in := range r.Inject {
				if err := injectReadable(in); err != nil {
					problems = append(problems, fmt.Sprintf("%s %s header %s: %v", name, r.Host, in.Header, err))
				}
			}
		}
	}
	if len(profiles) == 0 {
		l.Active = true
		l.Detail = "no profile has egress: no jail has any network, and no gateway is started"
		return l
	}
	took, err := gatewaySelfTest(ctx)
	if err != nil {
		l.Detail = "the gateway failed its self-test: " + err.Error()
		l.Fix = "report a bug: egress profiles fail closed (their runs are refused) until it passes"
		l.Required = true
		return l
	}
	l.Detail = fmt.Sprintf("gateway decided a self-test request in %d µs; %s", took.Microseconds(), strings.Join(profiles, "; "))
	if len(problems) > 0 {
		l.Detail += "; inject sources not readable: " + strings.Join(problems, "; ")
		l.Fix = "set the variable in the server's environment or make the file readable by the server: requests to those hosts fail until then"
		return l
	}
	l.Active = true
	return l
}

// injectReadable checks an inject source the way the gateway reads it,
// without returning its value.
func injectReadable(in policy.Inject) error {
	var v string
	if in.Env != "" {
		v = os.Getenv(in.Env)
		if v == "" {
			return fmt.Errorf("environment variable %s is empty or unset here", in.Env)
		}
		return nil
	}
	b, err := os.ReadFile(in.File)
	if err != nil {
		return err
	}
	v = strings.TrimRight(string(b), "\r\n")
	if v == "" || strings.ContainsAny(v, "\r\n\x00") {
		return fmt.Errorf("%s is empty or holds a line break", in.File)
	}
	return nil
}

// gatewaySelfTest starts a gateway on a loopback listener under a policy
// that allows nothing, sends it a CONNECT, and requires the refusal: a
// 403 with the sentence, and the attempt in the run's report.
func gatewaySelfTest(ctx context.Context) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	gw := egress.New(egress.Config{
		// Nothing may be resolved or dialed by the self-test.
		Lookup: func(context.Context, string) ([]netip.Addr, error) { return nil, errSelfTestDial },
		Dial:   func(context.Context, string, string) (net.Conn, error) { return nil, errSelfTestDial },
	})
	run := gw.Start(ctx, ln, &policy.Egress{Rules: []policy.EgressRule{{Host: "allowed.pyjail-doctor.invalid"}}})
	start := time.Now()
	status, body, err := selfTestConnect(ctx, ln.Addr().String(), "refused.pyjail-doctor.invalid:443")
	took := time.Since(start)
	rep := run.Close()
	switch {
	case err != nil:
		return 0, err
	case status != http.StatusForbidden || !strings.Contains(body, "not in this profile's egress allowlist"):
		return 0, fmt.Errorf("a CONNECT to a host outside the allowlist got %d %q, want 403 and the sentence", status, body)
	case len(rep.Entries) != 1 || rep.Entries[0].Verdict != "refused":
		return 0, fmt.Errorf("the run's report lists %+v, want one refused attempt", rep.Entries)
	}
	return took, nil
}

var errSelfTestDial = fmt.Errorf("the doctor's self-test dials nothing")

func selfTestConnect(ctx context.Context, addr, target string) (int, string, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return 0, "", err
	}
	defer c.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = c.SetDeadline(dl)
	}
	if _, err := fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target); err != nil {
		return 0, "", err
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b := make([]byte, 512)
	n, _ := resp.Body.Read(b)
	return resp.StatusCode, string(b[:n]), nil
}
