#!/bin/bash
# Runs inside the test VM, started by pyjail-vmtest.service (test/vm/image.sh)
# from the host's read-only 9p share /mnt/in, which test/vm/run.sh fills
# with this script, vm.env, bin/pyjail and the compiled integration tests.
# Everything it finds out goes to the read-write share /mnt/out:
#
#   info.txt           kernel, cgroup controllers, CPUs, memory, boot time
#   doctor.txt/.rc     `pyjail doctor` and its exit status
#   PASS.log/.rc       the test binary's -test.v output and exit status, per pass
#   done               written last: the script ran to its end
#
# Each pass runs the test binary as a transient systemd service with
# Delegate=yes, the way a systemd unit runs pyjail: the service moves
# itself into a leaf cgroup of its delegated subtree ("supervisor"), and
# its jails' cgroups go under the sibling "jails" (cgroup v2 allows no
# process in a cgroup whose controllers are enabled for its children).
# vm.env lists the passes and, per pass, the tests, extra environment and
# extra systemd-run properties; an executable /mnt/in/hooks/pre-PASS runs
# as root before a pass (a rootless pass creates its user there).
set -uo pipefail

in=/mnt/in
out=/mnt/out
work=/var/tmp/pyjail-vm

# Inside the transient unit: make the cgroup layout and run the tests.
if [ "${1:-}" = --in-unit ]; then
  pass=$2
  shift 2
  cg=$(sed -n 's/^0:://p' /proc/self/cgroup)
  # A pass running as a non-root user (User= in its properties) owns its
  # delegated subtree too: systemd chowns it to the unit's user.
  mkdir -p "/sys/fs/cgroup$cg/supervisor"
  echo $$ >"/sys/fs/cgroup$cg/supervisor/cgroup.procs"
  export PYJAIL_TEST_CGROUP_PARENT=$cg/jails
  echo "pass $pass: uid $(id -u), cgroup $cg, delegated: $(cat "/sys/fs/cgroup$cg/cgroup.controllers")"
  cd "$work" || exit 1
  exec "$work/integration.test" "$@"
fi

# shellcheck source=/dev/null
. "$in/vm.env"
up=$(cut -d' ' -f1 /proc/uptime)
echo "pyjail-vm: test script started ${up}s after boot"

mkdir -p "$work"
# Local copies: libcontainer re-executes the binary for every jail, and
# runc clones it into a sealed memfd each time; reading it from the guest's
# page cache beats a trip through 9p.
cp "$in/pyjail" "$in/integration.test" "$work/"
cp -r "$in/testdata" "$work/"
chmod 0755 "$work/pyjail" "$work/integration.test"

{
  echo "kernel: $(uname -r)"
  echo "cgroup filesystem: $(stat -f -c %T /sys/fs/cgroup)"
  echo "cgroup.controllers: $(cat /sys/fs/cgroup/cgroup.controllers)"
  echo "cgroup.subtree_control: $(cat /sys/fs/cgroup/cgroup.subtree_control)"
  echo "systemd: $(systemctl --version | head -1)"
  echo "cpus: $(nproc)"
  echo "memory: $(awk '/MemTotal/ {print $2 " kB"}' /proc/meminfo)"
  echo "rootfs: $(findmnt -n -o SOURCE,FSTYPE,OPTIONS /var/lib/pyjail/rootfs || echo 'not mounted')"
  echo "boot: test script started at ${up}s uptime"
} >"$out/info.txt"
cat "$out/info.txt"

"$work/pyjail" doctor >"$out/doctor.txt" 2>&1
echo $? >"$out/doctor.rc"
cat "$out/doctor.txt"

for pass in "${VM_PASSES[@]}"; do
  run_var=VM_RUN_$pass env_var=VM_ENV_$pass props_var=VM_PROPS_$pass
  if [ -x "$in/hooks/pre-$pass" ]; then
    echo "pass $pass: running hooks/pre-$pass"
    "$in/hooks/pre-$pass" >"$out/$pass.hook.log" 2>&1 || echo "pass $pass: hook failed ($?)"
  fi
  rootfs=/var/lib/pyjail/rootfs
  envs=(-E PYJAIL_TEST_MUST_RUN=1 -E "PYJAIL_TEST_ROOTFS=$rootfs" -E "PYJAIL_TEST_DEBIAN_ROOTFS=$rootfs"
    -E "PYJAIL_BIN=$work/pyjail" -E "PYJAIL_TEST_TIME_SCALE=${VM_TIME_SCALE:-1}")
  for kv in ${!env_var:-}; do envs+=(-E "$kv"); done
  # shellcheck disable=SC2206 # word splitting of the properties is meant
  props=(${!props_var:-})
  echo "pass $pass: -run '${!run_var}' ${!env_var:-} ${props[*]}"
  start=$(date +%s.%N)
  # --pipe: the unit's output is this script's; --wait: its exit status
  # too. The time bound of the whole VM is the host's; -test.timeout
  # makes Go print every goroutine well before that.
  systemd-run --quiet --wait --pipe --collect --unit="pyjail-test-$pass" \
    -p Delegate=yes -p Type=exec "${props[@]}" "${envs[@]}" \
    /bin/bash "$in/guest.sh" --in-unit "$pass" \
    -test.v -test.count=1 -test.timeout="${VM_TEST_TIMEOUT:-10m}" -test.run "${!run_var}" \
    </dev/null >"$out/$pass.log" 2>&1
  rc=$?
  echo "$rc" >"$out/$pass.rc"
  secs=$(echo "$(date +%s.%N) $start" | awk '{printf "%.1f", $1 - $2}')
  echo "pass $pass: exit $rc after ${secs}s"
  echo "$secs" >"$out/$pass.secs"
  grep -E '^(--- |ok|FAIL|panic)' "$out/$pass.log" || true
done

echo "pyjail-vm: done at $(cut -d' ' -f1 /proc/uptime)s uptime"
date -u +%FT%TZ >"$out/done"
sync
