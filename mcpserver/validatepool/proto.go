package validatepool

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/pyjail/pyjail/mcpserver/validate"
)

// The wire between supervisor and worker is a sequence of frames, each
//
//	u32 header length | header (JSON) | u32 blob count | (u32 length | bytes)*
//
// with big-endian lengths. Schemas and instances travel as blobs, raw, so
// that neither side re-encodes or re-scans them as part of a header.
const (
	maxHeaderBytes = 16 << 20
	maxBlobs       = 4096
	// maxBlobBytes sits above every limit a Registry accepts (instances
	// are 8 MiB by default, schemas 1 MiB); a frame past it is corrupt.
	maxBlobBytes = 1 << 30
)

// errFrame marks a malformed frame.
var errFrame = errors.New("malformed frame")

// frame is one decoded frame.
type frame struct {
	header []byte
	blobs  [][]byte
}

func writeFrame(w io.Writer, header any, blobs ...[]byte) error {
	h, err := json.Marshal(header)
	if err != nil {
		return fmt.Errorf("encoding frame header: %w", err)
	}
	bw := bufio.NewWriterSize(w, 64<<10)
	var n [4]byte
	put := func(b []byte) {
		binary.BigEndian.PutUint32(n[:], uint32(len(b)))
		_, _ = bw.Write(n[:])
		_, _ = bw.Write(b)
	}
	put(h)
	binary.BigEndian.PutUint32(n[:], uint32(len(blobs)))
	_, _ = bw.Write(n[:])
	for _, b := range blobs {
		put(b)
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("writing frame: %w", err)
	}
	return nil
}

func readFrame(r io.Reader) (frame, error) {
	var f frame
	readLen := func(limit uint32, what string) (uint32, error) {
		var n [4]byte
		if _, err := io.ReadFull(r, n[:]); err != nil {
			return 0, err
		}
		v := binary.BigEndian.Uint32(n[:])
		if v > limit {
			return 0, fmt.Errorf("%w: %s of %d exceeds %d", errFrame, what, v, limit)
		}
		return v, nil
	}
	read := func(n uint32) ([]byte, error) {
		b := make([]byte, n)
		if _, err := io.ReadFull(r, b); err != nil {
			return nil, unexpectedEOF(err)
		}
		return b, nil
	}
	hl, err := readLen(maxHeaderBytes, "header length")
	if err != nil {
		return f, err // io.EOF here is a clean end of the stream
	}
	if f.header, err = read(hl); err != nil {
		return f, err
	}
	nb, err := readLen(maxBlobs, "blob count")
	if err != nil {
		return f, unexpectedEOF(err)
	}
	for range nb {
		bl, err := readLen(maxBlobBytes, "blob length")
		if err != nil {
			return f, unexpectedEOF(err)
		}
		b, err := read(bl)
		if err != nil {
			return f, err
		}
		f.blobs = append(f.blobs, b)
	}
	return f, nil
}

func unexpectedEOF(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}

// hello is the supervisor's first frame; its blobs are the operator's
// schema files, in the order of Files.
type hello struct {
	Limits validate.Limits `json:"limits"`
	Files  []string        `json:"files"`
	// CallCPU is the CPU a single call may use before the kernel kills
	// the worker: the supervisor's budget plus a margin, a backstop for
	// a supervisor that failed to kill it in time.
	CallCPU time.Duration `json:"call_cpu"`
}

// ready answers hello: the worker built its registry (or Error says why
// not) and waits for requests.
type ready struct {
	PID   int    `json:"pid"`
	Error string `json:"error,omitempty"`
}

// request asks for one validation. Its blobs are the inline schema (empty
// when Schema names a registered one) and the instance's JSON text.
type request struct {
	Schema string `json:"schema,omitempty"`
}

// response answers a request.
type response struct {
	Result *validate.JSONResult `json:"result,omitempty"`
	Error  *wireError           `json:"error,omitempty"`
	// CPUNanos is the worker's CPU time (user and system) since it
	// started, after the request: the supervisor subtracts to account each
	// call.
	CPUNanos int64 `json:"cpu_ns"`
}

// wireError is an error about the request, carried as its message and
// the validate sentinels it wraps.
type wireError struct {
	Kinds   []string `json:"kinds"`
	Message string   `json:"message"`
}

// errorKinds maps validate's sentinels to their wire names.
func errorKinds() map[string]error {
	return map[string]error{
		"unknown_schema":    validate.ErrUnknownSchema,
		"invalid_schema":    validate.ErrInvalidSchema,
		"ref_not_allowed":   validate.ErrRefNotAllowed,
		"invalid_json":      validate.ErrInvalidJSON,
		"too_large":         validate.ErrTooLarge,
		"too_deep":          validate.ErrTooDeep,
		"too_complex":       validate.ErrTooComplex,
		"unsupported_value": validate.ErrUnsupportedValue,
	}
}

// toWire encodes err for the supervisor, with every sentinel it wraps.
func toWire(err error) *wireError {
	w := &wireError{Kinds: []string{}, Message: clip(err.Error(), maxMessageBytes)}
	for name, kind := range errorKinds() {
		if errors.Is(err, kind) {
			w.Kinds = append(w.Kinds, name)
		}
	}
	slices.Sort(w.Kinds)
	return w
}

// remoteError is a worker's error about a request, rebuilt in the
// supervisor: the worker's message, wrapping the same sentinels.
type remoteError struct {
	msg   string
	kinds []error
}

func (e *remoteError) Error() string   { return e.msg }
func (e *remoteError) Unwrap() []error { return e.kinds }

func (w *wireError) err() error {
	e := &remoteError{msg: w.Message}
	for _, name := range w.Kinds {
		if kind, ok := errorKinds()[name]; ok {
			e.kinds = append(e.kinds, kind)
		}
	}
	if len(e.kinds) == 0 {
		return fmt.Errorf("%w: %s", ErrWorker, w.Message)
	}
	return e
}

// maxMessageBytes caps each message a worker sends back. Library messages
// can quote whole enums or values; a hundred of them must still make a
// small answer.
const maxMessageBytes = 2 << 10

// clip shortens s to at most n bytes, on a UTF-8 boundary, saying so.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && s[cut]&0xC0 == 0x80 {
		cut--
	}
	return fmt.Sprintf("%s… (%d bytes omitted)", s[:cut], len(s)-cut)
}
