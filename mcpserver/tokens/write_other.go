//go:build !linux

package tokens

// update refuses to rewrite tokens files outside Linux, where the lock
// and the owner-preserving rename of write_linux.go are not built.
func update(string, func(*File) error) error { return ErrUnsupported }
