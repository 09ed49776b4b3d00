package walk

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/pyjail/pyjail/policy"
)

var (
	// ErrTooDeep means directories are nested more deeply than
	// Limits.MaxDepth allows.
	ErrTooDeep = errors.New("workspace nested too deeply")
	// ErrTooManyFiles means the workspace holds more entries than
	// Limits.MaxFiles allows.
	ErrTooManyFiles = errors.New("too many files in workspace")
	// ErrTooLarge means the regular files of the workspace hold more bytes
	// than Limits.MaxBytes allows.
	ErrTooLarge = errors.New("workspace too large")
	// ErrNotRegular is returned by Entry.OpenRegular for anything but a
	// regular file, including a file swapped for something else since the
	// walk saw it.
	ErrNotRegular = errors.New("not a regular file")
	// ErrUnsupported means the platform lacks the descriptor-relative
	// system calls the walk relies on.
	ErrUnsupported = errors.New("workspace walks are only supported on Linux")
)

// LimitError reports a workspace that exceeds a shape limit, or a host
// write or restore that would make it exceed one and was refused before
// anything changed. errors.Is matches its Err (ErrTooDeep,
// ErrTooManyFiles or ErrTooLarge); use errors.As to read the numbers.
// Its message is plain words meant for people and models.
type LimitError struct {
	// Err is ErrTooDeep, ErrTooManyFiles or ErrTooLarge.
	Err error
	// Limit is the limit exceeded. Got is what was found: exact when
	// Exact is set, else a walk stopped as soon as it saw more than Limit.
	Limit, Got int64
	Exact      bool
	// Path is the entry where a walk stopped or the path that a write or
	// restore would create, slash-separated; "" if none applies.
	Path string
	// Would marks a refusal before the fact: the workspace would exceed
	// the limit if the operation went ahead.
	Would bool
}

func (e *LimitError) Unwrap() error { return e.Err }

func (e *LimitError) Error() string {
	got := count(e.Got)
	if !e.Exact {
		got = "more than " + count(e.Limit)
	}
	var s string
	switch {
	case errors.Is(e.Err, ErrTooDeep) && e.Would:
		s = fmt.Sprintf("%s would be under %s nested directories", quote(e.Path), got)
	case errors.Is(e.Err, ErrTooDeep):
		s = fmt.Sprintf("workspace has %s nested directories", got)
		if e.Path != "" {
			s += " (at " + quote(e.Path) + ")"
		}
	case errors.Is(e.Err, ErrTooManyFiles) && e.Would:
		s = fmt.Sprintf("workspace would have %s files and directories", got)
	case errors.Is(e.Err, ErrTooManyFiles):
		s = fmt.Sprintf("workspace has %s files and directories", got)
	case errors.Is(e.Err, ErrTooLarge):
		got = policy.FormatBytes(e.Got)
		if !e.Exact {
			got = "more than " + policy.FormatBytes(e.Limit)
		}
		verb := "holds"
		if e.Would {
			verb = "would hold"
		}
		s = fmt.Sprintf("workspace %s %s in files", verb, got)
		return s + "; the limit is " + policy.FormatBytes(e.Limit)
	default:
		s = fmt.Sprintf("workspace exceeds a limit (%v: %d)", e.Err, e.Got)
	}
	return s + "; the limit is " + count(e.Limit)
}

// count renders n with thousands separators: "100,000".
func count(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// quote renders a path for a message, shortened in the middle when long:
// a 2,000-level path would otherwise fill the message.
func quote(p string) string {
	const keep = 40
	if len(p) > 2*keep+3 {
		p = p[:keep] + "…" + p[len(p)-keep:]
	}
	return strconv.Quote(p)
}
