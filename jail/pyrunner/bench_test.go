package pyrunner

import (
	"context"
	"testing"
	"time"

	"github.com/pyjail/pyjail/policy"
)

// BenchmarkRunner measures what the Python layer adds to a run. Each
// iteration starts a fresh runner, as the jail does. Reported metrics:
//
//	run-ms  process start to exit (cold jail)
//	exec-ms code sent to reply read (what a warm, preloaded jail costs)
//	cpu-ms  the runner's user+system CPU time for the whole run
//
// Compare calc and workspace against none for the layer's cost:
//
//	go test ./jail/pyrunner -run '^$' -bench Runner -benchtime 20x
func BenchmarkRunner(b *testing.B) {
	requirePython(b)
	cases := []struct {
		name    string
		code    string
		preload []string
	}{
		{"pass", "pass", nil},
		{"numpy", "import numpy; numpy.arange(10).sum()", nil},
		{"numpy-preloaded", "import numpy; numpy.arange(10).sum()", []string{"numpy"}},
	}
	for _, layer := range []policy.PythonLayer{policy.LayerNone, policy.LayerCalc, policy.LayerWorkspace} {
		for _, c := range cases {
			b.Run(string(layer)+"/"+c.name, func(b *testing.B) {
				s := newSandbox(b)
				boot := bootFor(s, layer)
				boot.Preload = c.preload
				var run, exec, cpu time.Duration
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					out := runRunner(b, context.Background(), s, boot, c.code)
					if out.Reply.Status != StatusOK {
						b.Fatalf("status %q\n%s", out.Reply.Status, out)
					}
					run += out.Elapsed
					exec += out.Exec
					cpu += out.CPU
				}
				b.ReportMetric(float64(run.Microseconds())/1000/float64(b.N), "run-ms")
				b.ReportMetric(float64(exec.Microseconds())/1000/float64(b.N), "exec-ms")
				b.ReportMetric(float64(cpu.Microseconds())/1000/float64(b.N), "cpu-ms")
			})
		}
	}
}
