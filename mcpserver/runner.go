package mcpserver

import (
	"context"

	"github.com/pyjail/pyjail/record"
)

// Runner runs one execution in a fresh jail. *jail.Jail satisfies it, and
// so do the warm pool and the fakes in tests. Run returns a Result for
// every outcome of the code, including timeouts and limit kills; an error
// means the sandbox itself could not run it.
type Runner interface {
	Run(ctx context.Context, req record.Request) (*record.Result, error)
}
