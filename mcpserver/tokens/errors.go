package tokens

import (
	"errors"
	"fmt"
	"strings"
)

var (
	// ErrInvalid wraps every problem Parse finds in a tokens file, so a
	// caller can tell a bad file from one it could not read.
	ErrInvalid = errors.New("invalid tokens file")
	// ErrInvalidName is a tenant name outside [a-z0-9][a-z0-9_-]{0,62}.
	ErrInvalidName = errors.New("invalid tenant name")
	// ErrTenantExists is Add of a tenant the file already has, without
	// rotation.
	ErrTenantExists = errors.New("tenant already exists")
	// ErrNoTenant is Remove, or Add with rotation, of a tenant the file
	// does not have.
	ErrNoTenant = errors.New("no such tenant")
	// ErrUnsupported is a rewrite of the tokens file on an operating
	// system where it cannot be locked and replaced the way Linux does it.
	ErrUnsupported = errors.New("rewriting tokens files is supported on Linux only")
)

// ParseError is one problem in a tokens file. Line is 1-based (0 when the
// problem belongs to no line, such as a duplicate found across entries);
// Entry is the 1-based index among the file's entries, or 0 outside one.
type ParseError struct {
	Line   int
	Entry  int
	Tenant string
	Err    error
}

func (e *ParseError) Error() string {
	var where string
	switch {
	case e.Entry > 0 && e.Tenant != "":
		where = fmt.Sprintf("entry %d (tenant %q)", e.Entry, e.Tenant)
	case e.Entry > 0:
		where = fmt.Sprintf("entry %d", e.Entry)
	case e.Tenant != "":
		where = fmt.Sprintf("tenant %q", e.Tenant)
	}
	switch {
	case e.Line > 0 && where != "":
		return fmt.Sprintf("line %d: %s: %v", e.Line, where, e.Err)
	case e.Line > 0:
		return fmt.Sprintf("line %d: %v", e.Line, e.Err)
	case where != "":
		return fmt.Sprintf("%s: %v", where, e.Err)
	}
	return e.Err.Error()
}

func (e *ParseError) Unwrap() error { return e.Err }

// joinErrs combines the problems of one line or entry into one error that
// reads on one line ("a; b") and still unwraps to each of them.
func joinErrs(errs []error) error {
	if len(errs) == 1 {
		return errs[0]
	}
	return lineErrors(errs)
}

type lineErrors []error

func (e lineErrors) Error() string {
	parts := make([]string, len(e))
	for i, err := range e {
		parts[i] = err.Error()
	}
	return strings.Join(parts, "; ")
}

func (e lineErrors) Unwrap() []error { return e }
