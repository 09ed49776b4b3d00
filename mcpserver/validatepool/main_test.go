package validatepool

import (
	"os"
	"testing"
)

// TestMain lets the test binary serve as its own validation worker: the
// pool re-executes it with WorkerArg, as cmd/pyjail does for the real
// binary.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == WorkerArg {
		os.Exit(Main(os.Stdin, os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}
