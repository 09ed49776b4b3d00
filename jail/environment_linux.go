//go:build linux && cgo

package jail

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/pyjail/pyjail/jail/record"
	"github.com/pyjail/pyjail/policy"
)

// environmentProbe runs inside a jail (full profile) and prints what a
// model should know before writing code: the interpreter and the versions
// of the packages it can use. It reads package metadata only.
const environmentProbe = `
import json, platform, sys
from importlib import metadata
wanted = ["numpy", "pandas", "scipy", "sympy", "matplotlib", "mpmath", "python-dateutil", "pytz"]
pkgs = {}
for name in wanted:
    try:
        pkgs[name] = metadata.version(name)
    except metadata.PackageNotFoundError:
        pass
print(json.dumps({
    "python": platform.python_version(),
    "implementation": platform.python_implementation(),
    "executable": sys.executable,
    "packages": pkgs,
    "all_packages": sorted({d.metadata["Name"] + "==" + d.version for d in metadata.distributions() if d.metadata["Name"]}),
}))
`

// Environment describes the Python inside the jails.
type Environment struct {
	Python         string            `json:"python"`
	Implementation string            `json:"implementation"`
	Executable     string            `json:"executable"`
	Packages       map[string]string `json:"packages"`
	AllPackages    []string          `json:"all_packages"`
	Rootfs         string            `json:"rootfs"`
}

// Environment runs the probe in a fresh jail and decodes its answer.
func (j *Jail) Environment(ctx context.Context) (*Environment, error) {
	res, err := j.Run(ctx, record.Request{Profile: policy.ProfileFull, Code: environmentProbe, Timeout: 30 * time.Second})
	if err != nil {
		return nil, fmt.Errorf("probing the jail's Python: %w", err)
	}
	if res.Verdict != record.VerdictOK {
		return nil, fmt.Errorf("probing the jail's Python: %s: %s %s", res.Verdict, res.Message, res.Stderr)
	}
	var env Environment
	if err := json.Unmarshal([]byte(res.Stdout), &env); err != nil {
		return nil, fmt.Errorf("decoding the environment probe: %w", err)
	}
	env.Rootfs = fmt.Sprintf("%s (%s)", j.cfg.Rootfs.Kind, j.cfg.Rootfs.Root)
	return &env, nil
}
