package packages

import (
	"encoding/json"
	"strings"
)

// pipPrelude is the start of both scripts the install jail runs (full
// Python, kernel isolation only; its working directory is the staging
// directory). pip is the rootfs's wheel (python3-pip-whl), run as a zip
// from outside sys.path, so user code never imports it; it reaches the
// index through the egress gateway (HTTPS_PROXY, set by the jail).
const pipPrelude = `import glob, os, re, subprocess, sys
wheels = sorted(glob.glob("/usr/share/python-wheels/pip-*.whl"))
if not wheels:
    print("PJPKG nopip -", flush=True)
    sys.exit(3)
PIP = [sys.executable, "-I", wheels[-1] + "/pip"]
INDEX = %s
TRUST = %s
COMMON = ["--index-url", INDEX, *TRUST, "--no-input", "--disable-pip-version-check", "--no-cache-dir", "--progress-bar", "off"]
BINARY = %s
env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1", PIP_CONFIG_FILE=os.devnull)
def pip(*args):
    p = subprocess.run(PIP + list(args), env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    return p.returncode, p.stdout
def fail(out):
    sys.stderr.write(out[-6000:])
    sys.exit(1)
`

// resolveTail: pip resolves the requirements for this Python against the
// rootfs (what it holds counts as installed) and writes its report; on a
// failure for want of a version, it asks the index whether the package
// has source distributions only, and says so on a marker line.
const resolveTail = `rc, out = pip("install", "--dry-run", "--quiet", "--report", "report.json", *COMMON, *BINARY, "-r", "requirements.txt")
if rc != 0:
    m = re.search(r"satisfies the requirement ([A-Za-z0-9._-]+)", out)
    if m and BINARY:
        name = m.group(1)
        rc2, out2 = pip("index", "versions", name, "--index-url", INDEX, *TRUST, "--no-input", "--disable-pip-version-check", "--no-cache-dir")
        if rc2 == 0 and "Available versions" in out2:
            print("PJPKG sdist-only " + name, flush=True)
        else:
            print("PJPKG missing " + name, flush=True)
    fail(out)
`

// fetchTail: pip downloads the pinned wheels the staging directory does
// not hold yet (cached ones were copied in), checking the index's hashes,
// and installs them, without dependencies (the resolve step named them
// all), from that directory alone into the staged layer.
const fetchTail = `sys.path.insert(0, wheels[-1])
os.environ.update(PYTHONDONTWRITEBYTECODE="1", PIP_CONFIG_FILE=os.devnull)
# Both steps in this one interpreter: importing pip is most of a pip run.
from pip._internal.cli.main import main as pipmain
rc = pipmain(["download", "--no-deps", *HASHES, *COMMON, *BINARY, "-d", "wheels", "-r", "pinned.txt"])
if rc != 0:
    sys.exit(1)
rc = pipmain(["install", "--no-deps", "--no-index", "--find-links", "wheels", *HASHES, "--target", "site", "--upgrade", "--no-warn-script-location", "--no-input", "--disable-pip-version-check", "--no-cache-dir", "--progress-bar", "off", "-r", "pinned.txt"])
if rc != 0:
    sys.exit(1)
`

// pyString renders s as a Python string literal (JSON strings are
// Python literals for the text JSON escapes).
func pyString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func (in *Installer) prelude() string {
	binary := `["--only-binary", ":all:"]`
	if in.Config.AllowBuilds {
		binary = "[]"
	}
	out := strings.Replace(strings.Replace(pipPrelude, "INDEX = %s", "INDEX = "+pyString(in.Config.IndexURL), 1),
		"BINARY = %s", "BINARY = "+binary, 1)
	trust := "[]"
	if strings.HasPrefix(in.Config.IndexURL, "http://") {
		// A plain-HTTP mirror is the operator's choice (policy allows it
		// for a mirror they run); pip ignores such an index unless told
		// the host is trusted. Hashes are still checked.
		if host, _, err := in.Config.IndexHost(); err == nil {
			trust = `["--trusted-host", ` + pyString(host) + `]`
		}
	}
	return strings.Replace(out, "TRUST = %s", "TRUST = "+trust, 1)
}

func (in *Installer) resolveScript() string { return in.prelude() + resolveTail }

func (in *Installer) fetchScript(hashed bool) string {
	h := "HASHES = []\n"
	if hashed {
		h = `HASHES = ["--require-hashes"]` + "\n"
	}
	return in.prelude() + h + fetchTail
}
