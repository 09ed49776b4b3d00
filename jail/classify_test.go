package jail

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/pyjail/pyjail/jail/pyrunner"
	"github.com/pyjail/pyjail/policy"
	"github.com/pyjail/pyjail/record"
)

func TestClassify(t *testing.T) {
	value := "42"
	for name, tc := range map[string]struct {
		res         record.Result
		in          classifyInput
		wantVerdict record.Verdict
		wantMsg     string
		wantErr     error
	}{
		"ok": {
			in:          classifyInput{reply: &pyrunner.Reply{Status: pyrunner.StatusOK, Value: &value}},
			wantVerdict: record.VerdictOK,
		},
		"exception": {
			res:         record.Result{ExitCode: 1},
			in:          classifyInput{reply: &pyrunner.Reply{Status: pyrunner.StatusError, Exception: "ValueError", Message: "bad"}},
			wantVerdict: record.VerdictError, wantMsg: "the code raised ValueError: bad",
		},
		"timeout after a wait for a slot names the whole limit": {
			res:         record.Result{Signal: "SIGKILL", ExitCode: -1},
			in:          classifyInput{timedOut: true, timeout: 3 * time.Second, queued: 2 * time.Second},
			wantVerdict: record.VerdictTimeout, wantMsg: "wall-clock limit of 5 s exceeded (2 s of it waiting for a free jail)",
			wantErr: ErrTimeout,
		},
		"oom kill wins over everything": {
			res:         record.Result{Signal: "SIGKILL", ExitCode: -1, PeakMemoryBytes: 256 * policy.MiB},
			in:          classifyInput{oomKills: 1, memoryLimit: 256 * policy.MiB, timedOut: true},
			wantVerdict: record.VerdictMemoryLimit, wantMsg: "memory limit of 256 MiB exceeded (peak 256 MiB)",
			wantErr: ErrMemoryLimit,
		},
		"MemoryError at the address-space limit": {
			res:         record.Result{ExitCode: 1, PeakMemoryBytes: 12 * policy.MiB},
			in:          classifyInput{reply: &pyrunner.Reply{Status: pyrunner.StatusMemoryError, Exception: "MemoryError"}, memoryLimit: 256 * policy.MiB},
			wantVerdict: record.VerdictMemoryLimit, wantMsg: "memory limit of 256 MiB exceeded (peak 12 MiB): MemoryError",
		},
		"timeout": {
			res:         record.Result{Signal: "SIGKILL", ExitCode: -1},
			in:          classifyInput{timedOut: true, timeout: 5 * time.Second},
			wantVerdict: record.VerdictTimeout, wantMsg: "wall-clock limit of 5 s exceeded", wantErr: ErrTimeout,
		},
		"SIGXCPU is the CPU limit": {
			res:         record.Result{Signal: "SIGXCPU", ExitCode: -1},
			in:          classifyInput{cpuLimit: 6 * time.Second},
			wantVerdict: record.VerdictCPULimit, wantMsg: "CPU-time limit of 6 s exceeded",
		},
		"SIGKILL after the CPU limit": {
			res:         record.Result{Signal: "SIGKILL", ExitCode: -1, CPUMS: 7000},
			in:          classifyInput{cpuLimit: 6 * time.Second},
			wantVerdict: record.VerdictCPULimit,
		},
		"SIGKILL below the CPU limit is an error": {
			res:         record.Result{Signal: "SIGKILL", ExitCode: -1, CPUMS: 100},
			in:          classifyInput{cpuLimit: 6 * time.Second},
			wantVerdict: record.VerdictError, wantMsg: "killed by SIGKILL",
		},
		"flood": {
			res:         record.Result{Truncated: record.Truncated{Stdout: true}, Signal: "SIGKILL"},
			in:          classifyInput{flooded: true, outputLimit: policy.MiB, cpuLimit: time.Hour},
			wantVerdict: record.VerdictOutputLimit, wantMsg: "output limit of 1 MiB per stream exceeded on stdout", wantErr: ErrOutputLimit,
		},
		"truncated but finished": {
			res:         record.Result{Truncated: record.Truncated{Stderr: true}},
			in:          classifyInput{reply: &pyrunner.Reply{Status: pyrunner.StatusOK}, outputLimit: policy.MiB},
			wantVerdict: record.VerdictOutputLimit, wantMsg: "on stderr",
		},
		"rejected": {
			res: record.Result{ExitCode: 1},
			in: classifyInput{reply: &pyrunner.Reply{
				Status:     pyrunner.StatusRejected,
				Rejections: []record.Rejection{{Rule: "PJ003", Message: "import of os is blocked", Line: 1, Col: 0}},
			}},
			wantVerdict: record.VerdictRejected, wantMsg: "PJ003 at line 1 col 0: import of os is blocked", wantErr: ErrRejected,
		},
		"runner died without reply": {
			res:         record.Result{ExitCode: 3},
			wantVerdict: record.VerdictError, wantMsg: "exited with status 3 without a result",
		},
		"ok reply but nonzero exit is not ok": {
			res:         record.Result{ExitCode: 2},
			in:          classifyInput{reply: &pyrunner.Reply{Status: pyrunner.StatusOK}},
			wantVerdict: record.VerdictError,
		},
	} {
		t.Run(name, func(t *testing.T) {
			res := tc.res
			classify(&res, tc.in)
			if got, want := res.Verdict, tc.wantVerdict; got != want {
				t.Fatalf("verdict %s, want %s (message %q)", got, want, res.Message)
			}
			if !strings.Contains(res.Message, tc.wantMsg) {
				t.Errorf("message %q does not contain %q", res.Message, tc.wantMsg)
			}
			if tc.wantErr != nil && !errors.Is(ResultErr(&res), tc.wantErr) {
				t.Errorf("ResultErr = %v, want %v", ResultErr(&res), tc.wantErr)
			}
			if res.Verdict == record.VerdictError {
				var ee *ExitError
				if !errors.As(ResultErr(&res), &ee) {
					t.Errorf("ResultErr = %v, want *ExitError", ResultErr(&res))
				}
			}
		})
	}
}

func TestCappedBuffer(t *testing.T) {
	for name, tc := range map[string]struct {
		limit     int
		writes    []string
		want      string
		truncated bool
	}{
		"fits":    {limit: 16, writes: []string{"hello ", "world"}, want: "hello world"},
		"exactly": {limit: 4, writes: []string{"abcd"}, want: "abcd"},
		"prefix and suffix": {
			limit: 8, writes: []string{"0123456789", "abcdef"},
			want: "012345\n... [pyjail: omitted 8 bytes of output] ...\nef", truncated: true,
		},
		"many small writes": {
			limit: 8, writes: strings.Split("0123456789abcdef", ""),
			want: "012345\n... [pyjail: omitted 8 bytes of output] ...\nef", truncated: true,
		},
	} {
		t.Run(name, func(t *testing.T) {
			b := newCappedBuffer(tc.limit)
			for _, w := range tc.writes {
				b.Write([]byte(w))
			}
			if got := b.String(); got != tc.want {
				t.Errorf("String() = %q, want %q", got, tc.want)
			}
			if got := b.Truncated(); got != tc.truncated {
				t.Errorf("Truncated() = %v, want %v", got, tc.truncated)
			}
		})
	}
}
