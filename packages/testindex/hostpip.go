package testindex

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"

	"github.com/pyjail/pyjail/record"
)

// HostPip runs an Installer's scripts with the host's Debian python3 in
// the request's workspace, as the install jail runs them in its own (the
// scripts use relative paths and the rootfs's pip wheel, which a Debian
// host with python3-pip-whl has at the same path). No isolation: for
// tests against a loopback index only.
type HostPip struct {
	// Runs counts the scripts run.
	Runs atomic.Int64
	// After, if set, runs after each script (a hostile jail's doing).
	After func(req record.Request)
}

// HostHasPip reports whether HostPip can run here.
func HostHasPip() bool {
	m, _ := filepath.Glob("/usr/share/python-wheels/pip-*.whl")
	_, err := os.Stat("/usr/bin/python3")
	return len(m) > 0 && err == nil
}

// Run runs req.Code with /usr/bin/python3 in req.Workspace.
func (h *HostPip) Run(ctx context.Context, req record.Request) (*record.Result, error) {
	h.Runs.Add(1)
	cmd := exec.CommandContext(ctx, "/usr/bin/python3", "-c", req.Code)
	cmd.Dir = req.Workspace
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + req.Workspace}
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	res := &record.Result{Verdict: record.VerdictOK, Profile: req.Profile, Stdout: out.String(), Stderr: errb.String()}
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		res.Verdict, res.ExitCode = record.VerdictError, ee.ExitCode()
	case err != nil:
		return nil, err
	}
	if h.After != nil {
		h.After(req)
	}
	return res, nil
}
