package bench

import (
	"bytes"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pyjail/pyjail/jail"
)

func TestPercentileNearestRank(t *testing.T) {
	seq := func(n int) []int {
		s := make([]int, n)
		for i := range s {
			s[i] = i + 1
		}
		return s
	}
	for name, tc := range map[string]struct {
		sorted []int
		p      float64
		want   int
	}{
		"empty":            {nil, 50, 0},
		"one sample":       {[]int{7}, 99, 7},
		"p50 of 30":        {seq(30), 50, 15},
		"p99 of 30 is max": {seq(30), 99, 30},
		"p50 of 31":        {seq(31), 50, 16},
		"p99 of 100":       {seq(100), 99, 99},
		"p99 of 200":       {seq(200), 99, 198},
		"p100 is max":      {seq(10), 100, 10},
		"p0 is min":        {seq(10), 0, 1},
		"p50 of 2 is low":  {[]int{3, 9}, 50, 3},
	} {
		t.Run(name, func(t *testing.T) {
			if got, want := percentile(tc.sorted, tc.p), tc.want; got != want {
				t.Errorf("percentile(%v, %v) = %d, want %d", tc.sorted, tc.p, got, want)
			}
		})
	}
}

func TestSummarizeSortsAndCounts(t *testing.T) {
	s := summarize([]time.Duration{30 * time.Millisecond, 10 * time.Millisecond, 20 * time.Millisecond, 1500 * time.Microsecond})
	if got, want := s, (summary{n: 4, min: 1.5, p50: 10, p99: 30}); got != want {
		t.Errorf("summarize = %+v, want %+v", got, want)
	}
	if got := summarize(nil); got != (summary{}) {
		t.Errorf("summarize(nil) = %+v, want zero", got)
	}
}

func TestSummarizeCasesRatioToGroupBaseline(t *testing.T) {
	msSamples := func(vs ...int) []time.Duration {
		out := make([]time.Duration, len(vs))
		for i, v := range vs {
			out[i] = time.Duration(v) * time.Millisecond
		}
		return out
	}
	a, b := benchCode{Label: "a"}, benchCode{Label: "b"}
	cases := []*benchCase{
		{code: a, name: "bare", baseline: true, samples: msSamples(40, 20, 30)},
		{code: a, name: "warm", warm: true, samples: msSamples(10, 5, 15), failed: 1, misses: 2},
		{code: a, name: "broken", skipped: "no bwrap"},
		{code: b, name: "bare", baseline: true, samples: msSamples(100)},
		{code: b, name: "cold", samples: msSamples(150)},
	}
	got := summarizeCases(cases)
	want := []caseStats{
		{Code: "a", Case: "bare", N: 3, MinMS: 20, P50MS: 30, P99MS: 40, Ratio: 1},
		{Code: "a", Case: "warm", N: 3, Failed: 1, Misses: 2, MinMS: 5, P50MS: 10, P99MS: 15, Ratio: 0.33},
		{Code: "a", Case: "broken", Skipped: "no bwrap"},
		{Code: "b", Case: "bare", N: 1, MinMS: 100, P50MS: 100, P99MS: 100, Ratio: 1},
		{Code: "b", Case: "cold", N: 1, MinMS: 150, P50MS: 150, P99MS: 150, Ratio: 1.5},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d rows, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("row %d = %+v, want %+v", i, got[i], want[i])
		}
	}
}

func TestSummarizePhases(t *testing.T) {
	cases := []*benchCase{
		{code: benchCode{Label: "p"}, name: "pyjail cold", phases: []jailTiming{
			{StartMS: 40, BootMS: 100, WallMS: 5, TotalMS: 110},
			{StartMS: 50, BootMS: 120, WallMS: 7, TotalMS: 131},
			{StartMS: 60, BootMS: 110, WallMS: 6, TotalMS: 120},
		}},
		{code: benchCode{Label: "p"}, name: "pyjail warm", warm: true, phases: []jailTiming{
			{StartMS: 40, BootMS: 900, WallMS: 20, TotalMS: 26.5},
		}},
		{code: benchCode{Label: "p"}, name: "python3 -c"},
	}
	got := summarizePhases(cases)
	want := []phaseStats{
		{Code: "p", Case: "pyjail cold", N: 3, ContainerMS: 50, RunnerBootMS: 60, ExecMS: 6, AfterExecMS: 4, TotalMS: 120},
		{Code: "p", Case: "pyjail warm", N: 1, ExecMS: 20, AfterExecMS: 6.5, TotalMS: 26.5},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d rows, want %d: %+v", len(got), len(want), got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("row %d = %+v, want %+v", i, got[i], want[i])
		}
	}
}

func TestWriteBenchText(t *testing.T) {
	rep := &Report{
		Version: "test", Profile: "calc", Rootfs: "host /r", CPUs: 2, MaxConcurrent: 4,
		LoadStart: "1.00 2.00 3.00", LoadEnd: "4.00 5.00 6.00", Runs: 30, WarmupRounds: 1,
		Cases: []caseStats{
			{Code: "print(1+1)", Case: "python3 -c", N: 30, MinMS: 30.04, P50MS: 35.26, P99MS: 48, Ratio: 1},
			{Code: "print(1+1)", Case: "pyjail warm", N: 29, Failed: 1, Misses: 1, MinMS: 2, P50MS: 3.5, P99MS: 150.4, Ratio: 0.1, Error: "verdict error: boom"},
			{Code: "print(1+1)", Case: "bwrap python3 -c", Skipped: "bwrap: setting up uid map"},
		},
		Phases:     []phaseStats{{Code: "print(1+1)", Case: "pyjail warm", N: 29, ExecMS: 2, AfterExecMS: 1.5, TotalMS: 3.5}},
		Steps:      []stepStats{{Code: "print(1+1)", Preload: "none", N: 10, StartMS: 90, ReplyMS: 3, ExitMS: 2, DestroyMS: 1}},
		Throughput: []throughputStats{{Mode: "pyjail warm pool", Callers: 4, Seconds: 10.04, Executions: 120, Warm: 20, Cold: 100, PerSecond: 11.95, P50MS: 300, P99MS: 900, CPU: cpuCost{SupervisorMS: 40, JailsMS: 210, PyjailMS: 250, MachineMS: 262.4, OtherMS: 12.4}}},
		Pool:       poolStats{Size: 2, Preload: []string{"numpy", "pandas"}, Idle: 2, PerJailBytes: 76 << 20, Boots: 30, BootP50MS: 1000, BootP99MS: 2000, Hits: 30},
		Notes:      []string{"a note"},
	}
	var buf bytes.Buffer
	WriteText(&buf, rep)
	out := buf.String()
	lines := strings.Split(out, "\n")
	for name, want := range map[string][]string{
		"header load":   {"load average 1.00 2.00 3.00 at start, 4.00 5.00 6.00 at end"},
		"baseline row":  {"print(1+1)", "python3", "-c", "30", "0", "30.0", "35.3", "48.0", "1.00×"},
		"warm row":      {"print(1+1)", "pyjail", "warm", "29", "1+1", "cold", "2.0", "3.5", "150", "0.10×"},
		"skipped row":   {"print(1+1)", "bwrap", "python3", "-c", "0", "-", "-", "-", "-", "skipped"},
		"phase row":     {"print(1+1)", "pyjail", "warm", "29", "(before)", "(before)", "2.0", "1.5", "3.5"},
		"steps row":     {"print(1+1)", "preload", "none", "10", "90.0", "(0.0)", "3.0", "2.0", "0.0", "0.0", "1.0"},
		"throughput":    {"pyjail", "warm", "pool", "4", "10.0", "120", "(20/100)", "0", "11.9", "300/900", "40.0+210=250", "262", "(12.4)"},
		"pool row":      {"2", "76.0", "1000/2000", "30", "0.0", "30/0"},
		"skip reason":   {"skipped", "print(1+1)", "/", "bwrap", "python3", "-c:", "bwrap:", "setting", "up", "uid", "map"},
		"failure":       {"failures", "in", "print(1+1)", "/", "pyjail", "warm,", "last:", "verdict", "error:", "boom"},
		"note":          {"note:", "a", "note"},
		"latency rules": {"latency: 30 timed runs per case after 1 warm-up round"},
	} {
		t.Run(name, func(t *testing.T) {
			for _, l := range lines {
				if len(want) == 1 && strings.Contains(l, want[0]) {
					return
				}
				if slices.Equal(strings.Fields(l), want) {
					return
				}
			}
			t.Errorf("no line with fields %q in:\n%s", want, out)
		})
	}
}

// TestWriteBenchTextAligned checks that the latency rows line up: every
// column ends at the same offset, so the table reads in a terminal.
func TestWriteBenchTextAligned(t *testing.T) {
	rep := &Report{Cases: []caseStats{
		{Code: "print(1+1)", Case: "python3 -c", N: 30, P50MS: 35, P99MS: 48, Ratio: 1},
		{Code: "pandas groupby", Case: "subprocess + 4 imports (ref. design)", N: 3, P50MS: 1234.5, P99MS: 2000, Ratio: 35.27},
	}}
	var buf bytes.Buffer
	WriteText(&buf, rep)
	var rows []string
	for _, l := range strings.Split(buf.String(), "\n") {
		if strings.Contains(l, "×") {
			rows = append(rows, l)
		}
	}
	if len(rows) != 3 { // header and two cases
		t.Fatalf("got %d table rows, want 3:\n%s", len(rows), buf.String())
	}
	for _, r := range rows[1:] {
		if got, want := len([]rune(r)), len([]rune(rows[0])); got != want {
			t.Errorf("row %q is %d runes wide, header %d", r, got, want)
		}
	}
}

// TestRecorderKeepsTypedTimings: the jail's timing hook, not its logs,
// fills the bench's columns; idle jails destroyed unused report no run.
func TestRecorderKeepsTypedTimings(t *testing.T) {
	waited := 0
	r := &recorder{wait: func() { waited++ }}
	ready := jail.Timing{Event: jail.EventReady, ID: "pj-1-a", Launched: 40 * time.Millisecond, Start: 110 * time.Millisecond}
	r.observe(ready)
	done := ready
	done.Event, done.Wall, done.Reply = jail.EventDone, 6*time.Millisecond, 5*time.Millisecond
	r.observe(done)
	unused := jail.Timing{Event: jail.EventDone, ID: "pj-1-b", Start: 90 * time.Millisecond}
	r.observe(unused)

	if got := r.takeBoots(); len(got) != 1 || got[0] != ready {
		t.Errorf("takeBoots = %+v, want the one ready jail", got)
	}
	if got := r.takeDone(); len(got) != 1 || got[0] != done {
		t.Errorf("takeDone = %+v, want the one jail that ran", got)
	}
	if got := r.takeDone(); len(got) != 0 {
		t.Errorf("second takeDone = %+v, want none", got)
	}
	if waited != 2 {
		t.Errorf("takeDone waited for teardowns %d times, want 2", waited)
	}
	if got, want := fromTiming(done), (jailTiming{StartMS: 40, BootMS: 110, WallMS: 6}); got != want {
		t.Errorf("fromTiming = %+v, want %+v", got, want)
	}
}

func TestBwrapArgsRunTheCode(t *testing.T) {
	args := bwrapArgs("print(1+1)")
	joined := strings.Join(args, " ")
	for _, want := range []string{"--unshare-all", "--ro-bind /usr /usr", "--proc /proc", "--dev /dev", "--tmpfs /tmp"} {
		if !strings.Contains(joined, want) {
			t.Errorf("bwrap args %q lack %q", joined, want)
		}
	}
	if got, want := args[len(args)-3:], []string{benchPython, "-c", "print(1+1)"}; !slices.Equal(got, want) {
		t.Errorf("bwrap args end with %q, want %q", got, want)
	}
}

func TestParseCPULine(t *testing.T) {
	// user nice system idle iowait irq softirq steal guest guest_nice
	got, err := parseCPULine("cpu  100 5 50 9000 40 3 2 0 7 0")
	if err != nil {
		t.Fatal(err)
	}
	// 100+5+50+3+2+0 ticks busy: idle, iowait and guest (inside user) are not.
	if want := 160 * 10 * time.Millisecond; got != want {
		t.Errorf("busy = %v, want %v", got, want)
	}
	for _, bad := range []string{"", "cpu0 1 2 3 4 5 6 7 8", "cpu 1 2 3", "cpu 1 x 3 4 5 6 7 8"} {
		if _, err := parseCPULine(bad); err == nil {
			t.Errorf("parseCPULine(%q) took it", bad)
		}
	}
}

func TestCostPer(t *testing.T) {
	before := cpuSample{supervisor: time.Second, jails: 10 * time.Second, busy: 100 * time.Second}
	after := cpuSample{supervisor: 3 * time.Second, jails: 16 * time.Second, busy: 109 * time.Second}
	got := costPer(before, after, 1000)
	want := cpuCost{SupervisorMS: 2, JailsMS: 6, PyjailMS: 8, MachineMS: 9, OtherMS: 1}
	if got != want {
		t.Errorf("costPer = %+v, want %+v", got, want)
	}
	// A machine that counted less than pyjail (ticks round down) has no
	// negative "other".
	after.busy = 107 * time.Second
	if got := costPer(before, after, 1000); got.OtherMS != 0 || got.MachineMS != 7 {
		t.Errorf("rounded-down machine: %+v", got)
	}
	// An unread tree says so and counts nothing for it.
	after.jailsErr = errors.New("no cgroup")
	if got := costPer(before, after, 1000); got.JailsMS != 0 || got.PyjailMS != 2 || !strings.Contains(got.Unread, "jails: no cgroup") {
		t.Errorf("unread tree: %+v", got)
	}
	if got := costPer(before, after, 0); got != (cpuCost{}) {
		t.Errorf("no executions: %+v, want zero", got)
	}
}

func TestMachineBusyReads(t *testing.T) {
	a, err := machineBusy()
	if err != nil {
		t.Fatal(err)
	}
	// Burn a little CPU: the machine's busy counter cannot go back.
	for deadline := time.Now().Add(30 * time.Millisecond); time.Now().Before(deadline); {
	}
	b, err := machineBusy()
	if err != nil {
		t.Fatal(err)
	}
	if b < a || a == 0 {
		t.Errorf("busy went from %v to %v", a, b)
	}
}
