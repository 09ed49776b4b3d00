package fake_test

import (
	"context"
	"errors"
	"testing"

	"github.com/pyjail/pyjail/mcpserver"
	"github.com/pyjail/pyjail/mcpserver/fake"
	"github.com/pyjail/pyjail/record"
)

var _ mcpserver.Runner = (*fake.Runner)(nil)

func TestRunner(t *testing.T) {
	for name, tc := range map[string]struct {
		runner    *fake.Runner
		cancel    bool
		wantErr   error
		wantOut   string
		cancelled int
	}{
		"echo":            {runner: &fake.Runner{}, wantOut: "print(1)\n"},
		"blocked cancels": {runner: &fake.Runner{Block: true}, cancel: true, wantErr: context.Canceled, cancelled: 1},
		"canned": {runner: &fake.Runner{Result: func(context.Context, record.Request) (*record.Result, error) {
			return &record.Result{Verdict: record.VerdictOK, Stdout: "canned"}, nil
		}}, wantOut: "canned"},
	} {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			if tc.cancel {
				go func() {
					<-tc.runner.Started()
					cancel()
				}()
			}
			res, err := tc.runner.Run(ctx, record.Request{Profile: record.ProfileCalc, Code: "print(1)"})
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
			if err == nil && res.Stdout != tc.wantOut {
				t.Errorf("stdout = %q, want %q", res.Stdout, tc.wantOut)
			}
			if got := tc.runner.Cancelled(); got != tc.cancelled {
				t.Errorf("cancelled = %d, want %d", got, tc.cancelled)
			}
			if got := len(tc.runner.Requests()); got != 1 {
				t.Errorf("%d requests recorded", got)
			}
		})
	}
}
