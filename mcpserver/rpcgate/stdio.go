package rpcgate

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"sync"
)

// Stdio puts a Gate between a newline-delimited transport (MCP's stdio)
// and a server that reads and writes it, such as mcp-go's StdioServer: the
// server reads Stdio and writes to it, and Stdio reads the real input and
// writes the real output. Each line is read with the size cap, however
// long it is, in bounded memory; refusals are answered on the output
// directly and never reach the server.
//
// Writes must each carry whole lines (mcp-go writes one message and its
// newline per Write). Stdio is safe for one reader and any number of
// writers at once.
type Stdio struct {
	g  *Gate
	br *bufio.Reader

	pending []byte // a forwarded message the reader has not consumed
	readErr error  // the input's error, returned once pending is drained

	mu     sync.Mutex // serialises writes to out
	out    io.Writer
	closed bool
}

// NewStdio wraps in and out with g.
func NewStdio(g *Gate, in io.Reader, out io.Writer) *Stdio {
	return &Stdio{g: g, br: bufio.NewReaderSize(in, 64<<10), out: out}
}

// Read returns screened, rebuilt messages, one per line.
func (s *Stdio) Read(p []byte) (int, error) {
	for len(s.pending) == 0 {
		if s.readErr != nil {
			return 0, s.readErr
		}
		fwd, ans, err := s.next()
		if ans != nil {
			if werr := s.writeLine(ans); werr != nil && err == nil {
				err = werr
			}
		}
		if fwd != nil {
			s.pending = append(fwd, '\n')
		}
		s.readErr = err
	}
	n := copy(p, s.pending)
	s.pending = s.pending[n:]
	return n, nil
}

// next reads and screens one line. A line over the cap is scanned as it
// streams past and never held.
func (s *Stdio) next() (forward, answer []byte, err error) {
	sc := s.g.newScanner()
	var (
		buf  []byte
		size int64
		over bool
	)
	for {
		chunk, rerr := s.br.ReadSlice('\n')
		body := bytes.TrimSuffix(chunk, []byte("\n"))
		size += int64(len(body))
		sc.feed(body)
		if !over {
			if size > s.g.cfg.MaxMessageBytes {
				over, buf = true, nil
			} else {
				buf = append(buf, body...)
			}
		}
		if errors.Is(rerr, bufio.ErrBufferFull) {
			continue
		}
		err = rerr
		break
	}
	if size == 0 || len(bytes.TrimSpace(buf)) == 0 && !over {
		// Blank lines separate nothing; EOF ends the stream.
		return nil, nil, err
	}
	sc.finish()
	if over {
		return nil, s.g.oversize(size, sc), err
	}
	forward, answer = s.g.screen(bytes.TrimSuffix(buf, []byte("\r")), sc)
	return forward, answer, err
}

// Write screens each line the server writes and sends what the gate
// returns.
func (s *Stdio) Write(p []byte) (int, error) {
	rest := p
	for len(rest) > 0 {
		line, after, found := bytes.Cut(rest, []byte("\n"))
		rest = after
		if !found && len(line) == 0 {
			break
		}
		if out := s.g.Outbound(line); out != nil {
			if err := s.writeLine(out); err != nil {
				return 0, err
			}
		}
	}
	return len(p), nil
}

func (s *Stdio) writeLine(msg []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	buf := make([]byte, 0, len(msg)+1)
	buf = append(append(buf, msg...), '\n')
	_, err := s.out.Write(buf)
	return err
}

// Close makes later writes to the output no-ops: once the transport has
// stopped, nothing may appear on its output, even from a Read still
// blocked on the input.
func (s *Stdio) Close() {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
}
