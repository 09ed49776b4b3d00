package sessionstore

import "sync"

// shared keeps one value per path for as long as any call of this process
// uses it, so that calls on the same key meet at the same lock, and drops
// it after the last: the table holds the keys in use, not every key ever
// seen.
type shared[T any] struct {
	mu sync.Mutex
	m  map[string]*sharedEntry[T]
}

type sharedEntry[T any] struct {
	v    T
	refs int
}

// get returns path's value, making it with newValue if no call holds
// one, and a function that gives it back.
func (s *shared[T]) get(path string, newValue func() (T, error)) (T, func()) {
	v, release, _ := s.getErr(path, newValue)
	return v, release
}

// getErr is get for a newValue that can fail. newValue runs outside the
// table's mutex (it may do I/O); if two calls make a value at once, the
// first to come back wins and the other's is dropped.
func (s *shared[T]) getErr(path string, newValue func() (T, error)) (T, func(), error) {
	s.mu.Lock()
	e := s.m[path]
	if e == nil {
		s.mu.Unlock()
		v, err := newValue()
		if err != nil {
			var zero T
			return zero, nil, err
		}
		s.mu.Lock()
		if e = s.m[path]; e == nil {
			if s.m == nil {
				s.m = map[string]*sharedEntry[T]{}
			}
			e = &sharedEntry[T]{v: v}
			s.m[path] = e
		}
	}
	e.refs++
	s.mu.Unlock()
	return e.v, sync.OnceFunc(func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if e.refs--; e.refs == 0 {
			delete(s.m, path)
		}
	}), nil
}
