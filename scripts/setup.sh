#!/usr/bin/env bash
# Sets up a Debian 12 (or Ubuntu) machine to build, run and test pyjail,
# then builds bin/pyjail. Run as root from the repository root. The README,
# .ci/run and the Vagrantfile all use this one script.
#
#   bash scripts/setup.sh        # build, test and serve
#   bash scripts/setup.sh --vm   # also what `make vm-test` needs (qemu and
#                                # Debian's kernel, whose image and initrd
#                                # the cgroup v2 test VM boots) and vagrant
#   bash scripts/setup.sh --image  # also what `make image` and the image
#                                # test need (mmdebstrap, podman, runc)
# The flags combine: setup.sh --vm --image.
set -euo pipefail
cd "$(dirname "$0")/.."
vm=0 image=0
for a in "$@"; do
  case $a in
    --vm) vm=1 ;;
    --image) image=1 ;;
    *) echo "setup.sh: unknown flag $a (--vm, --image)" >&2; exit 2 ;;
  esac
done

GO_VERSION=$(awk '/^go /{print $2}' go.mod)

log() { printf '\033[1m[setup]\033[0m %s\n' "$*" >&2; }

if [ "$(id -u)" != 0 ]; then
  echo "setup.sh must run as root (it installs packages)" >&2
  exit 1
fi

# 1. Debian packages: the C toolchain and libseccomp for cgo, Python and
# the scientific stack the jail serves (and dill, which session
# checkpoints use: the runner's tests run it with the host's python3), the rootfs builder, Node for the
# end-to-end tests (the official MCP SDK client), benchmark peers, and
# systemd-analyze (package systemd) with /bin/kill (procps) for the test
# of dist/pyjail.service, and nginx for the scale-out test (test/scaleout),
# which runs its own nginx in the foreground. Installing systemd in a
# container starts nothing.
PKGS=(build-essential pkg-config libseccomp-dev git curl ca-certificates unzip
      python3 python3-numpy python3-pandas python3-scipy python3-sympy python3-matplotlib python3-dill
      mmdebstrap bubblewrap hyperfine systemd procps nginx)
command -v node >/dev/null 2>&1 || PKGS+=(nodejs npm)
# The VM test (test/vm): qemu, the kernel it boots (installing it on a
# host that boots another kernel changes nothing there but /boot), and
# mke2fs for the guest image; vagrant, to validate the Vagrantfile.
[ "$vm" = 1 ] && PKGS+=(qemu-system-x86 linux-image-amd64 e2fsprogs vagrant)
# The container image (make image) and its test (test/image_test.go):
# mmdebstrap builds the base, podman runs the image with runc (crun refuses
# cgroup v1 and hybrid hosts), uidmap gives podman newuidmap for
# --userns=auto, catatonit is the pause process of a pod that `podman kube
# play` builds locally (a Recommends of podman, which --no-install-recommends
# leaves out), and kubectl renders deploy/kubernetes when it is there.
[ "$image" = 1 ] && PKGS+=(mmdebstrap podman runc uidmap catatonit)
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  log "installing: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  # Debian's nginx package starts a site on port 80 where systemd runs;
  # the scale-out test starts its own nginx and needs none of that.
  if [[ " ${missing[*]} " == *" nginx "* ]] && [ -d /run/systemd/system ]; then
    systemctl disable --now nginx >/dev/null 2>&1 || true
  fi
fi

# podman --userns=auto (kube play of hostUsers: false) takes the pod's ids
# from the range of the user "containers".
if [ "$image" = 1 ]; then
  for f in /etc/subuid /etc/subgid; do
    grep -q '^containers:' "$f" 2>/dev/null || echo 'containers:2147483647:2147483648' >> "$f"
  done
fi

# 2. Go. Debian 12 ships Go 1.19, older than go.mod needs; the official
# toolchain is published as a Go module, so fetch it through the module
# proxy, exactly as `go` does itself with GOTOOLCHAIN.
have_go() { command -v go >/dev/null 2>&1 && go version >/dev/null 2>&1; }
if ! have_go && [ -x /usr/local/go/bin/go ]; then export PATH=/usr/local/go/bin:$PATH; fi
if ! have_go || [ "$(printf '%s\n1.21\n' "$(go env GOVERSION | sed 's/^go//')" | sort -V | head -1)" != 1.21 ]; then
  arch=$(dpkg --print-architecture)
  proxy=$(echo "${GOPROXY:-https://proxy.golang.org}" | cut -d, -f1)
  log "installing Go $GO_VERSION from $proxy"
  tmp=$(mktemp -d)
  curl -fsSL -o "$tmp/go.zip" "$proxy/golang.org/toolchain/@v/v0.0.1-go$GO_VERSION.linux-$arch.zip"
  unzip -q "$tmp/go.zip" -d "$tmp"
  rm -rf /usr/local/go
  mv "$tmp/golang.org/toolchain@v0.0.1-go$GO_VERSION.linux-$arch" /usr/local/go
  chmod -R a+rX /usr/local/go
  chmod +x /usr/local/go/bin/* /usr/local/go/pkg/tool/*/*
  rm -rf "$tmp"
  export PATH=/usr/local/go/bin:$PATH
fi
ln -sf "$(command -v go)" /usr/local/bin/go 2>/dev/null || true

# 3. Node packages of the end-to-end tests, from the committed lockfile.
if [ -f test/e2e/package-lock.json ]; then
  log "installing end-to-end test client (npm ci)"
  (cd test/e2e && npm ci --no-audit --no-fund --loglevel=error)
fi

# 4. Build.
log "building bin/pyjail"
make build
log "done: $(./bin/pyjail version)"
