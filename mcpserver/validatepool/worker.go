package validatepool

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/pyjail/pyjail/mcpserver/validate"
)

// WorkerArg is the hidden first argument that makes the pyjail binary a
// validation worker (cmd/pyjail dispatches it to Main).
const WorkerArg = "__validate-worker"

// workerEnv marks a process as a worker. A worker never starts workers of
// its own, so a binary that was started as a worker by mistake (a test
// binary without the dispatch, say) cannot multiply.
const workerEnv = "PYJAIL_VALIDATE_WORKER"

// Main is the worker process: it hardens itself, then serves frames on in
// and out until in ends. It returns the process exit status.
func Main(in io.Reader, out io.Writer, stderr io.Writer) int {
	if os.Getenv(workerEnv) != "1" {
		fmt.Fprintf(stderr, "pyjail: %s is internal: the server starts it\n", WorkerArg)
		return 2
	}
	if err := hardenWorker(); err != nil {
		fmt.Fprintf(stderr, "pyjail validation worker: %v\n", err)
		return 1
	}
	if err := serve(in, out, &processGuard{}); err != nil {
		fmt.Fprintf(stderr, "pyjail validation worker: %v\n", err)
		return 1
	}
	return 0
}

// guard is what a worker process does around the loop; tests serve
// in-process without one.
type guard interface {
	// started runs after hello, before anything from a caller is read.
	started(h hello) error
	// calling runs before each request is handled, done after.
	calling() error
	done()
}

// processGuard drops privileges and arms the kernel's per-call CPU limit.
type processGuard struct {
	timer   *cpuTimer
	callCPU time.Duration
}

func (g *processGuard) started(h hello) error {
	if err := dropPrivileges(); err != nil {
		return err
	}
	t, err := newCPUTimer()
	if err != nil {
		return err
	}
	g.timer, g.callCPU = t, h.CallCPU
	return nil
}

func (g *processGuard) calling() error {
	if g.callCPU <= 0 {
		return nil
	}
	return g.timer.arm(g.callCPU)
}

func (g *processGuard) done() {
	if g.callCPU > 0 {
		_ = g.timer.arm(0)
	}
}

// serve is the worker's loop: hello, then one response per request, in
// order, until in reaches EOF. It returns nil at a clean EOF.
func serve(in io.Reader, out io.Writer, g guard) error {
	br := bufio.NewReaderSize(in, 64<<10)
	f, err := readFrame(br)
	if err != nil {
		return fmt.Errorf("reading hello: %w", err)
	}
	var h hello
	if err := json.Unmarshal(f.header, &h); err != nil {
		return fmt.Errorf("decoding hello: %w", err)
	}
	if g != nil {
		if err := g.started(h); err != nil {
			return errors.Join(err, writeFrame(out, ready{PID: os.Getpid(), Error: err.Error()}))
		}
	}
	reg, err := registryFromHello(h, f.blobs)
	rd := ready{PID: os.Getpid()}
	if err != nil {
		rd.Error = err.Error()
	}
	if werr := writeFrame(out, rd); werr != nil || err != nil {
		return errors.Join(err, werr)
	}
	for {
		f, err := readFrame(br)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("reading request: %w", err)
		}
		if g != nil {
			if err := g.calling(); err != nil {
				return err
			}
		}
		resp := handle(reg, f)
		if g != nil {
			g.done()
		}
		resp.CPUNanos = selfCPU().Nanoseconds()
		if err := writeFrame(out, resp); err != nil {
			return err
		}
	}
}

func registryFromHello(h hello, blobs [][]byte) (*validate.Registry, error) {
	if len(h.Files) != len(blobs) {
		return nil, fmt.Errorf("%w: hello names %d files but carries %d", errFrame, len(h.Files), len(blobs))
	}
	files := make(map[string][]byte, len(h.Files))
	for i, name := range h.Files {
		files[name] = blobs[i]
	}
	reg, err := validate.NewRegistryFromFiles(files, h.Limits)
	if err != nil {
		return nil, fmt.Errorf("building the schema registry: %w", err)
	}
	return reg, nil
}

// handle serves one request. Everything that depends on the caller's
// schema or data happens here, inside the budget: decoding, compiling,
// validating and flattening the errors.
func handle(reg *validate.Registry, f frame) response {
	var req request
	if err := json.Unmarshal(f.header, &req); err != nil || len(f.blobs) != 2 {
		return response{Error: &wireError{Message: "malformed request frame"}}
	}
	inst, err := validate.DecodeInstance(f.blobs[1], reg.Limits())
	if err != nil {
		return response{Error: toWire(err)}
	}
	var res *validate.JSONResult
	if req.Schema != "" {
		res, err = reg.Validate(req.Schema, inst)
	} else {
		res, err = reg.ValidateInline(f.blobs[0], inst)
	}
	if err != nil {
		return response{Error: toWire(err)}
	}
	for i := range res.Errors {
		e := &res.Errors[i]
		e.Message = clip(e.Message, maxMessageBytes)
		e.InstanceLocation = clip(e.InstanceLocation, maxMessageBytes)
		e.KeywordLocation = clip(e.KeywordLocation, maxMessageBytes)
	}
	return response{Result: res}
}
