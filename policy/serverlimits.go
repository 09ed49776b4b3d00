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
}

// MaxAnswerBytes is the ceiling of ServerLimits.AnswerBytes and the cap
// on every message the server sends: safely under the 10 MiB at which the
// official clients drop a message and close the session.
const MaxAnswerBytes = 8 * MiB

// DefaultServerLimits returns two validation workers with 1 s of CPU and
// 2 s of wall-clock time per call and 512 MiB each, 64 MiB messages and
// 4 MiB tool results.
func DefaultServerLimits() ServerLimits {
	return ServerLimits{
		ValidationWorkers:     2,
		ValidationCPU:         Duration(time.Second),
		ValidationWall:        Duration(2 * time.Second),
		ValidationMemoryBytes: 512 * MiB,
		MessageBytes:          64 * MiB,
		AnswerBytes:           4 * MiB,
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
	return errors.Join(errs...)
}
