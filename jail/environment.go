package jail

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
