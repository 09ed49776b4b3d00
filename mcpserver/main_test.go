package mcpserver

import (
	"os"
	"testing"

	"github.com/pyjail/pyjail/mcpserver/validatepool"
)

// TestMain lets the test binary serve as its own validation worker, as
// cmd/pyjail does for the real binary: validate_json runs in a worker
// process in these tests too.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == validatepool.WorkerArg {
		os.Exit(validatepool.Main(os.Stdin, os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// workerCommand starts this test binary as a validation worker.
func workerCommand() []string { return []string{"/proc/self/exe", validatepool.WorkerArg} }
