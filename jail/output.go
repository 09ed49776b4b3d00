package jail

import (
	"fmt"
	"io"
	"sync"
)

// floodFactor: a stream that writes this many times its cap is killed
// (output_limit) instead of being drained until the deadline.
const floodFactor = 16

// cappedBuffer keeps at most limit bytes of a stream: a prefix and a
// suffix, with the number of omitted bytes between them, the way
// os/exec's ExitError keeps stderr. It is safe for concurrent use.
type cappedBuffer struct {
	mu     sync.Mutex
	limit  int
	prefix []byte
	// suffix is a ring of the last suffixCap bytes once the prefix is full.
	suffix    []byte
	suffixCap int
	suffixPos int
	total     int64
}

func newCappedBuffer(limit int) *cappedBuffer {
	// A quarter of the budget goes to the tail: tracebacks and final
	// results are printed last and matter most after a flood.
	suffixCap := limit / 4
	return &cappedBuffer{limit: limit, suffixCap: suffixCap, prefix: make([]byte, 0, min(limit-suffixCap, 64<<10))}
}

// Write never fails, so a flood never blocks the writer on a full buffer.
func (b *cappedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := len(p)
	b.total += int64(n)
	if room := b.limit - b.suffixCap - len(b.prefix); room > 0 {
		k := min(room, len(p))
		b.prefix = append(b.prefix, p[:k]...)
		p = p[k:]
	}
	if len(p) == 0 || b.suffixCap == 0 {
		return n, nil
	}
	if len(p) > b.suffixCap {
		p = p[len(p)-b.suffixCap:]
	}
	for _, c := range p {
		if len(b.suffix) < b.suffixCap {
			b.suffix = append(b.suffix, c)
			continue
		}
		b.suffix[b.suffixPos] = c
		b.suffixPos = (b.suffixPos + 1) % b.suffixCap
	}
	return n, nil
}

// Total returns how many bytes were written, kept or not.
func (b *cappedBuffer) Total() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.total
}

// Truncated reports whether anything was dropped.
func (b *cappedBuffer) Truncated() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.total > int64(b.limit)
}

// String returns what was kept, with the omission stated in the middle.
func (b *cappedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.total <= int64(len(b.prefix)) {
		return string(b.prefix)
	}
	tail := make([]byte, 0, len(b.suffix))
	tail = append(tail, b.suffix[b.suffixPos:]...)
	tail = append(tail, b.suffix[:b.suffixPos]...)
	omitted := b.total - int64(len(b.prefix)) - int64(len(tail))
	if omitted <= 0 {
		return string(b.prefix) + string(tail)
	}
	return fmt.Sprintf("%s\n... [pyjail: omitted %d bytes of output] ...\n%s", b.prefix, omitted, tail)
}

// drain copies r into b until EOF or error, and reports the total through
// flood when it exceeds floodLimit, so the supervisor can kill a program
// that would otherwise print until its deadline.
func drain(r io.Reader, b *cappedBuffer, floodLimit int64, flood func()) {
	buf := make([]byte, 32<<10)
	signalled := false
	for {
		n, err := r.Read(buf)
		if n > 0 {
			_, _ = b.Write(buf[:n]) // never fails
			if !signalled && b.Total() > floodLimit {
				signalled = true
				flood()
			}
		}
		if err != nil {
			return
		}
	}
}
