package pyrunner

import (
	"context"
	"slices"
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

// BenchmarkCheckpoint measures a checkpoint and a restore at the runner,
// without the kernel layer, and reports medians (the machine is shared):
//
//	checkpoint-ms  Exec sent to reply read, the pipe drained meanwhile
//	restore-ms     the same for a restore into another session
//	blob-bytes     the checkpoint's size
//
//	go test ./jail/pyrunner -run '^$' -bench Checkpoint -benchtime 10x
func BenchmarkCheckpoint(b *testing.B) {
	requireDill(b, "numpy", "pandas")
	for name, setup := range map[string]string{
		"small":     "a, b, c, d, e = 1, 2.5, 'three', [4, 4], {'five': 5}\nf, g, h = (6,), {7}, b'8'\ndef i(x):\n    return x + a\nclass J:\n    k = 10",
		"dataframe": dataFrameSetup,
	} {
		b.Run(name, func(b *testing.B) {
			src := startSession(b, newSandbox(b), policy.LayerCalc)
			dst := startSession(b, newSandbox(b), policy.LayerCalc)
			if out := src.call(setup); out.Reply.Status != StatusOK {
				b.Fatalf("setup: %s", out)
			}
			var ck, rs []time.Duration
			var size int
			for b.Loop() {
				blob, out := src.checkpoint()
				if out.Reply.Status != StatusOK || len(out.Reply.Checkpoint.Skipped) != 0 {
					b.Fatalf("checkpoint: %s", out)
				}
				ck = append(ck, out.Exec)
				size = len(blob)
				out = dst.restore(blob)
				if out.Reply.Status != StatusOK || len(out.Reply.Checkpoint.NotRestored) != 0 {
					b.Fatalf("restore: %s", out)
				}
				rs = append(rs, out.Exec)
			}
			b.ReportMetric(median(ck), "checkpoint-ms")
			b.ReportMetric(median(rs), "restore-ms")
			b.ReportMetric(float64(size), "blob-bytes")
			b.ReportMetric(0, "ns/op") // the medians above are the figures
		})
	}
}

// median is the median of ds in milliseconds.
func median(ds []time.Duration) float64 {
	s := slices.Clone(ds)
	slices.Sort(s)
	m := s[len(s)/2]
	if len(s)%2 == 0 {
		m = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return float64(m.Microseconds()) / 1000
}
