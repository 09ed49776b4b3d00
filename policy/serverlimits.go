package policy

import (
	"errors"
	"fmt"
	"time"
)

// ServerLimits bound the work the MCP server does on the host, outside any
// jail, for one request: there no cgroup applies, so each of these is
// enforced by the server itself or by the kernel around a worker process.
type ServerLimits struct {
	// ValidationWorkers is how many validate_json calls run at once, each
	// in its own worker process.
	ValidationWorkers int `json:"validation_workers"`
	// ValidationCPU is the CPU time one validate_json call may use; the
	// kernel kills the worker past it.
	ValidationCPU Duration `json:"validation_cpu"`
	// ValidationWall is one call's wall-clock limit, for a host too busy
	// to give the worker its CPU.
	ValidationWall Duration `json:"validation_wall"`
	// ValidationMemoryBytes caps the memory of each worker.
	ValidationMemoryBytes int64 `json:"validation_memory_bytes"`
	// MessageBytes caps one JSON-RPC message from a client.
	MessageBytes int64 `json:"message_bytes"`
	// AnswerBytes caps one tool result as sent; long listings are
	// summarised to fit. The official MCP clients drop any message over
	// 10 MiB, so it must stay below MaxAnswerBytes.
	AnswerBytes int64 `json:"answer_bytes"`

	// The HTTP edge (issue 21): what connections and requests may hold
	// before any tool runs.
	//
	// HTTPBodyBudget caps the request body bytes being read and decoded
	// at once, server-wide; a request past it gets 503 with Retry-After.
	HTTPBodyBudget int64 `json:"http_body_budget_bytes"`
	// HTTPTenantBodyBytes caps one tenant's share of it (429).
	HTTPTenantBodyBytes int64 `json:"http_tenant_body_bytes"`
	// HTTPTenantRequests caps one tenant's POSTs in flight (429); event
	// streams (GET) do not count.
	HTTPTenantRequests int `json:"http_tenant_requests"`
	// HTTPTenantSessions caps one tenant's open MCP sessions (429).
	HTTPTenantSessions int `json:"http_tenant_sessions"`
	// HTTPBodyTimeout is how long a request's body may take to arrive;
	// a slower one is dropped.
	HTTPBodyTimeout Duration `json:"http_body_timeout"`
	// HTTPIdleTimeout drops a keep-alive connection idle between
	// requests this long.
	HTTPIdleTimeout Duration `json:"http_idle_timeout"`
}

// MaxAnswerBytes is the ceiling of ServerLimits.AnswerBytes and the cap
// on every message the server sends: safely under the 10 MiB at which the
// official clients drop a message and close the session.
const MaxAnswerBytes = 8 * MiB

// DefaultServerLimits returns two validation workers with 1 s of CPU and
// 2 s of wall-clock time per call and 512 MiB each, 64 MiB messages and
// 4 MiB tool results; at the HTTP edge 128 MiB of bodies at once (64 MiB
// a tenant), 32 requests in flight and 32 sessions a tenant, 30 s for a
// body and 60 s for an idle connection.
func DefaultServerLimits() ServerLimits {
	return ServerLimits{
		ValidationWorkers:     2,
		ValidationCPU:         Duration(time.Second),
		ValidationWall:        Duration(2 * time.Second),
		ValidationMemoryBytes: 512 * MiB,
		MessageBytes:          64 * MiB,
		AnswerBytes:           4 * MiB,
		HTTPBodyBudget:        128 * MiB,
		HTTPTenantBodyBytes:   64 * MiB,
		HTTPTenantRequests:    32,
		HTTPTenantSessions:    32,
		HTTPBodyTimeout:       Duration(30 * time.Second),
		HTTPIdleTimeout:       Duration(60 * time.Second),
	}
}

func checkServerLimits(c Config) error {
	l := c.Server
	var errs []error
	if l.ValidationWorkers < 1 || l.ValidationWorkers > 64 {
		errs = append(errs, fmt.Errorf("validation_workers %d must be in [1, 64]", l.ValidationWorkers))
	}
	if l.ValidationCPU.D() < 10*time.Millisecond || l.ValidationCPU.D() > time.Minute {
		errs = append(errs, fmt.Errorf("validation_cpu %v must be in [10ms, 1m]", l.ValidationCPU.D()))
	}
	if l.ValidationWall < l.ValidationCPU || l.ValidationWall.D() > 5*time.Minute {
		errs = append(errs, fmt.Errorf("validation_wall %v must be at least validation_cpu %v and at most 5m", l.ValidationWall.D(), l.ValidationCPU.D()))
	}
	if l.ValidationMemoryBytes < 64*MiB {
		errs = append(errs, fmt.Errorf("validation_memory_bytes %d is below 64 MiB, too little for a worker to start", l.ValidationMemoryBytes))
	}
	if l.MessageBytes < 64*KiB || l.MessageBytes > GiB {
		errs = append(errs, fmt.Errorf("message_bytes %d must be in [64 KiB, 1 GiB]", l.MessageBytes))
	}
	if l.AnswerBytes < 64*KiB || l.AnswerBytes > MaxAnswerBytes {
		errs = append(errs, fmt.Errorf("answer_bytes %d must be in [64 KiB, %s]: the official MCP clients drop messages over 10 MiB", l.AnswerBytes, FormatBytes(MaxAnswerBytes)))
	}
	if l.HTTPBodyBudget < l.MessageBytes || l.HTTPTenantBodyBytes < l.MessageBytes || l.HTTPTenantBodyBytes > l.HTTPBodyBudget {
		errs = append(errs, fmt.Errorf("http_tenant_body_bytes %d must be at least message_bytes %d and at most http_body_budget_bytes %d, else no message of the largest size could ever be read",
			l.HTTPTenantBodyBytes, l.MessageBytes, l.HTTPBodyBudget))
	}
	if l.HTTPTenantRequests < 1 || l.HTTPTenantRequests > 10_000 {
		errs = append(errs, fmt.Errorf("http_tenant_requests %d must be in [1, 10000]", l.HTTPTenantRequests))
	}
	if l.HTTPTenantSessions < 1 || l.HTTPTenantSessions > 10_000 {
		errs = append(errs, fmt.Errorf("http_tenant_sessions %d must be in [1, 10000]", l.HTTPTenantSessions))
	}
	if l.HTTPBodyTimeout.D() < time.Second || l.HTTPBodyTimeout.D() > 10*time.Minute {
		errs = append(errs, fmt.Errorf("http_body_timeout %v must be in [1s, 10m]", l.HTTPBodyTimeout.D()))
	}
	if l.HTTPIdleTimeout.D() < time.Second || l.HTTPIdleTimeout.D() > time.Hour {
		errs = append(errs, fmt.Errorf("http_idle_timeout %v must be in [1s, 1h]", l.HTTPIdleTimeout.D()))
	}
	return errors.Join(errs...)
}
