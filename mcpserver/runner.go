package mcpserver

import (
	"context"

	"github.com/pyjail/pyjail/mcpserver/validatepool"
	"github.com/pyjail/pyjail/record"
)

// Runner runs one execution in a fresh jail. *jail.Jail satisfies it, and
// so do the warm pool and the fakes in tests. Run returns a Result for
// every outcome of the code, including timeouts and limit kills; an error
// means the sandbox itself could not run it.
type Runner interface {
	Run(ctx context.Context, req record.Request) (*record.Result, error)
}

// JSONValidator validates JSON against a registered or inline schema
// outside the server process, under a budget. *validatepool.Pool
// satisfies it. Errors about the request wrap package validate's
// sentinels; a call over its budget wraps validatepool.ErrBudget.
type JSONValidator interface {
	Validate(ctx context.Context, req validatepool.Request) (validatepool.Outcome, error)
}

// ValidatorStatuser is implemented by JSONValidators that report their
// state; sandbox://status shows what Status returns.
type ValidatorStatuser interface {
	Status() validatepool.Status
}
