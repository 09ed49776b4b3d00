//go:build !linux

package walk

import (
	"context"
	"os"
)

// sysStat is empty: no walk runs on this platform.
type sysStat struct{}

// IsDir reports false: no Entry exists on this platform.
func (e *Entry) IsDir() bool { return false }

// OpenRegular fails with ErrUnsupported.
func (e *Entry) OpenRegular() (*os.File, error) { return nil, ErrUnsupported }

// Dir fails with ErrUnsupported: the walk needs Linux's openat/fstatat.
func Dir(context.Context, string, Limits, Func) error { return ErrUnsupported }

// In fails with ErrUnsupported.
func In(context.Context, *os.Root, string, Limits, Func) error { return ErrUnsupported }

// Check fails with ErrUnsupported.
func Check(context.Context, string, Limits) (Usage, error) { return Usage{}, ErrUnsupported }

// Chown fails with ErrUnsupported.
func Chown(context.Context, string, int, int, Limits) error { return ErrUnsupported }
