#!/usr/bin/env bash
# Runs pyjail's root-only integration tests in a Debian 12 VM on the
# unified cgroup v2 hierarchy (`make vm-test`). Run as root from the
# repository root, after `make build` and
# `go test -c -tags seccomp -o bin/integration.test ./test/`.
#
#  1. test/vm/image.sh builds or finds the cached guest image.
#  2. A bounded probe decides between KVM and TCG (software emulation).
#  3. qemu boots the host's Debian kernel and initrd on the image, with
#     snapshot=on (the cached image is never written), a second disk
#     holding a copy of the Python rootfs (also cached), and two 9p
#     shares: the inputs (test/vm/guest.sh, vm.env, the binaries, the test
#     fixtures), read-only, and an empty results directory.
#  4. systemd in the guest runs guest.sh, which runs each pass of the test
#     binary as a transient service with Delegate=yes, then powers off.
#  5. This script prints the summary (kernel, controllers, doctor, every
#     test with its result and time) and fails on any failure or skip, on a
#     missing result, or when the VM outlives VM_TIMEOUT (then with the
#     guest's console log).
#
# Environment (defaults in brackets):
#   VM_TIMEOUT        seconds for boot, tests and power-off [900]
#   VM_BUILD_TIMEOUT  seconds for an image build [1200]
#   VM_ACCEL          auto | tcg | kvm [auto: KVM only when a probe boots]
#   VM_CPUS, VM_MEMORY  guest CPUs and MiB [2, 4096]
#   VM_ROOTFS         the built Python rootfs the guest gets a copy of [/var/lib/pyjail/rootfs]
#   VM_OUT            where results go [bin/vm-test]
#   VM_PASSES         the passes, in order ["root forkserver"]
#   VM_RUN_<pass>     -test.run of a pass; VM_ENV_<pass>: extra NAME=VALUE
#                     words; VM_PROPS_<pass>: extra systemd-run words
#   VM_HOOKS          a directory of pre-<pass> executables for the guest
#   VM_SERVICE        1: start dist/pyjail.service, then pyjail-rootless.service
#                     in the guest after the passes and call tools over HTTP [1]
#   VM_DESKTOP        1: a logged-in regular user starts `pyjail serve` over
#                     stdio in a delegated scope of its own (rootless) [1]
#   VM_POD            1: run pyjail as root of a simulated pod's user
#                     namespace after that [1]
#   VM_TEST_TIMEOUT   -test.timeout of each pass [10m]
#   VM_QEMU_EXTRA     more qemu arguments (a second disk, ...)
#   VM_SHELL=1        boot to a root shell on this terminal instead
#   PYJAIL_BIN, VM_TEST_BIN  the binaries [bin/pyjail, bin/integration.test]
set -euo pipefail

log() { printf '\033[1m[vm-test]\033[0m %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }
here=$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")

TIMEOUT=${VM_TIMEOUT:-900}
BUILD_TIMEOUT=${VM_BUILD_TIMEOUT:-1200}
ACCEL=${VM_ACCEL:-auto}
CPUS=${VM_CPUS:-2}
MEMORY=${VM_MEMORY:-4096}
ROOTFS=${VM_ROOTFS:-/var/lib/pyjail/rootfs}
OUT=${VM_OUT:-bin/vm-test}
PYJAIL_BIN=${PYJAIL_BIN:-bin/pyjail}
TEST_BIN=${VM_TEST_BIN:-bin/integration.test}
read -ra PASSES <<<"${VM_PASSES:-root forkserver}"

[ "$(id -u)" = 0 ] || die "must run as root"
command -v qemu-system-x86_64 >/dev/null || die "qemu-system-x86_64 missing: apt-get install qemu-system-x86"
for f in "$PYJAIL_BIN" "$TEST_BIN"; do [ -x "$f" ] || die "$f missing: make build and go test -c first"; done
[ -f "$ROOTFS/.pyjail-manifest.json" ] || die "no built rootfs in $ROOTFS: make rootfs"
for p in "${PASSES[@]}"; do
  v=VM_RUN_$p
  [ -n "${!v:-}" ] || die "pass $p has no tests: set $v"
done

t0=$(date +%s.%N)
since() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN {printf "%.1f", b - a}'; }

# 1. The image (bounded: a cold build downloads packages).
image=$(timeout "$BUILD_TIMEOUT" bash "$here/image.sh") || die "image build failed or took over ${BUILD_TIMEOUT}s"
rootfs_disk=$(timeout "$BUILD_TIMEOUT" bash "$here/image.sh" rootfs "$ROOTFS") || die "rootfs disk failed"
t_image=$(since "$t0")
kver=$(sed -n 's/^kernel linux-image-\([^=]*\)=.*/\1/p' "${image%.img}.recipe")

# 2. KVM only when it really works: on some hosts (nested virtualisation)
# /dev/kvm opens but guests never run. A kernel with no root device
# panics within a second or two under KVM, about 5 s under TCG; qemu
# exits on the panic (panic=-1, -no-reboot). No output within the bound
# means KVM hangs here.
if [ "$ACCEL" = auto ]; then
  ACCEL=tcg
  why="no writable /dev/kvm"
  if [ -w /dev/kvm ]; then
    probe=$(mktemp)
    t_probe=$(date +%s.%N)
    # The probe's status comes out of a shell whose stderr is closed, so
    # that a qemu that aborts (here: "failed to set MSR") is not reported
    # as a crash of this script.
    prc=$(
      exec 2>/dev/null
      timeout 15 qemu-system-x86_64 -accel kvm -cpu host -m 256 -nodefaults -display none -no-reboot \
        -kernel "/boot/vmlinuz-$kver" -append "console=ttyS0 panic=-1" -serial "file:$probe" >/dev/null
      echo $?
    )
    why="KVM probe: qemu exit $prc after $(since "$t_probe")s"
    if [ "$prc" = 0 ] && grep -q "Kernel panic" "$probe"; then
      ACCEL=kvm
    fi
    rm -f "$probe"
  fi
  log "accelerator: $ACCEL ($why)"
fi
case $ACCEL in
  kvm) cpu=host ;;
  tcg) cpu=max ;;
  *) die "VM_ACCEL=$ACCEL: want auto, tcg or kvm" ;;
esac

# 3. The shares.
rm -rf "$OUT"
mkdir -p "$OUT/in" "$OUT/out"
cp "$here/guest.sh" "$OUT/in/"
cp "$PYJAIL_BIN" "$OUT/in/pyjail"
cp "$TEST_BIN" "$OUT/in/integration.test"
# The tests read their fixtures (the escape corpus) from ./testdata, as
# under go test, which runs a test binary in its package's directory.
cp -r "$here/../testdata" "$OUT/in/testdata"
if [ -n "${VM_HOOKS:-}" ]; then cp -r "$VM_HOOKS" "$OUT/in/hooks"; fi
# The rootless unit, which the guest starts for real once the passes are
# done (VM_SERVICE=0 skips that).
[ "${VM_SERVICE:-1}" = 1 ] && cp "$here/../../dist/pyjail.service" "$here/../../dist/pyjail-rootless.service" "$OUT/in/"
{
  printf 'VM_PASSES=(%s)\n' "${PASSES[*]}"
  printf 'VM_TEST_TIMEOUT=%q\n' "${VM_TEST_TIMEOUT:-10m}"
  printf 'VM_POD=%q\n' "${VM_POD:-1}"
  printf 'VM_DESKTOP=%q\n' "${VM_DESKTOP:-1}"
  # Latency bounds of the tests (not the jails' own limits) stretch under
  # emulation; see slow() in test/main_test.go.
  # A fork bomb's kill took 3 s here on a quiet host, 12 s on a busy one.
  [ "$ACCEL" = tcg ] && printf 'VM_TIME_SCALE=5\n'
  for p in "${PASSES[@]}"; do
    for k in RUN ENV PROPS; do
      v=VM_${k}_$p
      printf 'VM_%s_%s=%q\n' "$k" "$p" "${!v:-}"
    done
  done
} >"$OUT/in/vm.env"
console=$OUT/console.log

# 4. Boot. mitigations=off: the guest only tests namespaces, cgroups and
# seccomp, and under TCG every page-table switch the mitigations add is
# emulated. systemd.unified_cgroup_hierarchy=1 is Debian 12's default,
# stated so that this stays a pure v2 machine. quiet: the memory tests'
# OOM reports would fill the emulated serial line (warnings still show).
cmdline="console=ttyS0 root=/dev/vda rw rootfstype=ext4 systemd.unified_cgroup_hierarchy=1 mitigations=off panic=-1 quiet"
qemu=(qemu-system-x86_64 -accel "$ACCEL" -cpu "$cpu" -smp "$CPUS" -m "$MEMORY"
  -nodefaults -display none -no-reboot
  -kernel "/boot/vmlinuz-$kver" -initrd "/boot/initrd.img-$kver"
  -drive "file=$image,if=virtio,format=raw,snapshot=on"
  -drive "file=$rootfs_disk,if=virtio,format=raw,readonly=on"
  -device virtio-rng-pci
  -virtfs "local,path=$OUT/in,mount_tag=pjin,security_model=none,readonly=on"
  -virtfs "local,path=$OUT/out,mount_tag=pjout,security_model=none")
# shellcheck disable=SC2206 # extra qemu words, split as given
qemu+=(${VM_QEMU_EXTRA:-})
if [ "${VM_SHELL:-0}" = 1 ]; then
  # Interactive: a root shell on this terminal instead of the tests, with
  # the shares mounted (`bash /mnt/in/guest.sh` runs them). Ctrl-a x quits.
  log "shell on $kver ($ACCEL): the tests do not run; Ctrl-a x ends qemu"
  exec "${qemu[@]}" -serial mon:stdio -append "$cmdline systemd.mask=pyjail-vmtest.service"
fi
log "booting $kver ($ACCEL, $CPUS CPUs, $MEMORY MiB), bound ${TIMEOUT}s; console: $console"
t_boot=$(date +%s.%N)
set +e
timeout --kill-after=10 "$TIMEOUT" "${qemu[@]}" -serial "file:$console" \
  -append "$cmdline systemd.show_status=error systemd.mask=serial-getty@ttyS0.service" \
  >"$OUT/qemu.log" 2>&1
rc=$?
set -e
t_vm=$(since "$t_boot")

res=$OUT/out
if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
  log "TIMEOUT: the VM ran for over ${TIMEOUT}s; its console log follows"
  tail -n 200 "$console" >&2 || true
  for f in "$res"/*.log; do [ -f "$f" ] && { log "tail of $f"; tail -n 40 "$f" >&2; }; done
  exit 1
fi
[ "$rc" = 0 ] || { cat "$OUT/qemu.log" >&2; die "qemu exited with status $rc"; }

# 5. The summary.
fail=0
echo
echo "== pyjail VM test ($ACCEL): image ${t_image}s, VM ${t_vm}s (boot to test script: $(sed -n 's/^boot: test script started at \(.*\) uptime/\1/p' "$res/info.txt" 2>/dev/null))"
if [ ! -f "$res/info.txt" ]; then
  tail -n 100 "$console" >&2
  die "the guest never ran its test script; console log above"
fi
sed 's/^/   /' "$res/info.txt"
echo "== pyjail doctor (exit $(cat "$res/doctor.rc" 2>/dev/null || echo '?'))"
sed 's/^/   /' "$res/doctor.txt" 2>/dev/null || true
for p in "${PASSES[@]}"; do
  prc=$(cat "$res/$p.rc" 2>/dev/null || echo missing)
  echo "== pass $p: exit $prc, $(cat "$res/$p.secs" 2>/dev/null || echo '?')s"
  if [ ! -f "$res/$p.log" ]; then
    echo "   no log"
    fail=1
    continue
  fi
  # Top-level results are unindented "--- PASS: TestX (1.23s)"; failed
  # subtests are listed under their test.
  awk '
    /^--- (PASS|FAIL|SKIP): / { n++; printf "   %-4s %-50s %s\n", $2 == "PASS:" ? "PASS" : ($2 == "FAIL:" ? "FAIL" : "SKIP"), $3, $4 }
    /^ +--- (FAIL|SKIP): /    { printf "        %s %s %s\n", $2, $3, $4 }
    END { if (n == 0) print "   (no test ran)" }
  ' "$res/$p.log"
  if [ "$prc" != 0 ] || grep -Eq '^ *--- (FAIL|SKIP)' "$res/$p.log" || ! grep -q '^--- PASS' "$res/$p.log"; then
    fail=1
    echo "   -- failures and skips of pass $p:"
    grep -E -B2 -A25 '^ *--- (FAIL|SKIP)|^panic:' "$res/$p.log" | sed 's/^/   | /' | head -n 200
  fi
done
if [ "${VM_SERVICE:-1}" = 1 ]; then
  for unit in pyjail pyjail-rootless; do
    src=$(cat "$res/$unit.service.rc" 2>/dev/null || echo missing)
    echo "== dist/$unit.service under systemd: exit $src"
    sed 's/^/   /' "$res/$unit.service.txt" 2>/dev/null || echo "   no log"
    [ "$src" = 0 ] || fail=1
  done
fi
if [ "${VM_DESKTOP:-1}" = 1 ]; then
  drc=$(cat "$res/desktop.rc" 2>/dev/null || echo missing)
  echo "== a desktop user's own stdio server (systemd-run --user --scope -p Delegate=yes pyjail serve): exit $drc"
  sed 's/^/   /' "$res/desktop.txt" 2>/dev/null || echo "   no log"
  [ "$drc" = 0 ] || fail=1
fi
if [ "${VM_POD:-1}" = 1 ]; then
  prc=$(cat "$res/pod.rc" 2>/dev/null || echo missing)
  echo "== a user-namespaced pod, simulated (unshare with a chowned cgroup): exit $prc"
  sed 's/^/   /' "$res/pod.txt" 2>/dev/null || echo "   no log"
  [ "$prc" = 0 ] || fail=1
fi
[ -f "$res/done" ] || { echo "== the test script did not finish; console tail:"; tail -n 50 "$console"; fail=1; }
echo "== total $(since "$t0")s; logs in $OUT"
if [ "$fail" != 0 ]; then
  log "FAIL"
  exit 1
fi
log "PASS"
