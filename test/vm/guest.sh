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

# mcp ARGS...: one MCP request over HTTP to $mcp_url with the bearer
# $token and, once mcp_open has made one, the session id $sid.
mcp() {
  curl -sS --max-time 120 -H "Authorization: Bearer $token" -H 'Content-Type: application/json' \
    -H 'Accept: application/json, text/event-stream' ${sid:+-H "Mcp-Session-Id: $sid"} "$@" "$mcp_url"
}

# mcp_open: a new MCP session at $mcp_url (initialize, initialized).
mcp_open() {
  sid=
  mcp -D /tmp/mcp-hdr -o /dev/null -d '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-03-26","capabilities":{},"clientInfo":{"name":"vm","version":"1"}}}'
  sid=$(sed -n 's/^[Mm]cp-[Ss]ession-[Ii]d: *\([^[:space:]]*\).*/\1/p' /tmp/mcp-hdr)
  [ -n "$sid" ] || { echo "no session id"; cat /tmp/mcp-hdr; return 1; }
  mcp -o /dev/null -d '{"jsonrpc":"2.0","method":"notifications/initialized"}'
}

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
  if [ "$(id -u)" != 0 ]; then
    # An unprivileged pass shows what doctor says to that user (rootless),
    # a real jail included; the root doctor ran before the passes.
    dir=${PYJAIL_TEST_RUN_DIR:?an unprivileged pass needs PYJAIL_TEST_RUN_DIR}
    printf '{"state_dir": "%s/doctor"}\n' "$dir" >"$dir/doctor.json"
    echo "=== pyjail doctor as $(id -un) (uid $(id -u))"
    "$work/pyjail" doctor --start-jail --config "$dir/doctor.json" --rootfs /var/lib/pyjail/rootfs --data-dir "$dir" 2>&1 | sed 's/^/    /'
    echo "=== doctor exit ${PIPESTATUS[0]}"
  fi
  if [ "${PYJAIL_VM_BENCH:-0}" = 1 ]; then
    # Latency as this pass's user sees it (root and rootless compared by
    # hand: VM_ENV_<pass>='PYJAIL_VM_BENCH=1 ...'); not part of the verdict.
    dir=${PYJAIL_TEST_RUN_DIR:-/run}
    printf '{"state_dir": "%s/bench"}\n' "$dir" >"$dir/bench.json"
    echo "=== pyjail bench as $(id -un)"
    "$work/pyjail" bench --config "$dir/bench.json" --rootfs /var/lib/pyjail/rootfs --runs "${PYJAIL_VM_BENCH_RUNS:-20}" --duration 5s 2>&1 | sed 's/^/    /'
    echo "=== bench exit ${PIPESTATUS[0]}"
  fi
  exec "$work/integration.test" "$@"
fi

if [ "${1:-}" = --service ]; then
  # --service UNIT DATA_DIR: one of dist's units, started by systemd.
  set -e
  unit=$2 data=$3
  id pyjail >/dev/null 2>&1 || "$in/hooks/pre-rootless"
  install -m 0755 "$work/pyjail" /usr/local/bin/pyjail
  install -m 0644 "$in/$unit.service" /etc/systemd/system/
  mkdir -p /etc/pyjail
  rm -f /etc/pyjail/tokens.json
  token=$(pyjail token add "vm-$unit" --tokens /etc/pyjail/tokens.json 2>/dev/null)
  # The rootless server reads the tokens as the user pyjail.
  chgrp pyjail /etc/pyjail/tokens.json
  chmod 0640 /etc/pyjail/tokens.json
  systemctl daemon-reload
  systemctl start "$unit"
  for _ in $(seq 120); do
    curl -fs http://127.0.0.1:9090/readyz >/dev/null && break
    sleep 1
  done
  systemctl --no-pager status "$unit" | head -n 12
  echo "--- processes of the unit (host view: user, pid, command)"
  ps -o user=,pid=,args= -p "$(systemctl show -p MainPID --value "$unit")" --ppid "$(systemctl show -p MainPID --value "$unit")"
  echo "--- cgroups of the unit"
  cg=$(systemctl show -p ControlGroup --value "$unit")
  find "/sys/fs/cgroup$cg" -maxdepth 1 -type d | sed "s|/sys/fs/cgroup||"
  echo "subtree_control: $(cat "/sys/fs/cgroup$cg/cgroup.subtree_control")"
  mcp_url=http://127.0.0.1:8080/mcp
  mcp_open
  echo "--- run_python (calc)"
  mcp -d '{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"run_python","arguments":{"code":"print(6*7)"}}}' | tee /tmp/calc
  echo
  grep -q '42' /tmp/calc
  echo "--- run_sandbox_code: a file written in the tenant's workspace"
  mcp -d '{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"run_sandbox_code","arguments":{"code":"open(\"hello.txt\", \"w\").write(\"hi\")\nprint(open(\"hello.txt\").read())"}}}' | tee /tmp/ws
  echo
  mcp -d '{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"list_workspace_files","arguments":{}}}' | tee -a /tmp/ws
  echo
  grep -q 'hello.txt' /tmp/ws
  echo "--- on the host (numeric owners)"
  find "$data/tenants" -printf "%U:%G %m %p\n" | head -n 20
  # Issue 27: under the root unit the workspace is mounted idmapped, so the
  # directory keeps the unit user's ownership and the sandbox's file is
  # that user's on disk (nothing chowned). The rootless server runs in a
  # user namespace, where an idmapped mount of a host filesystem is not
  # allowed: its workspace is chowned to the sandbox, never left the unit
  # user's with a file of another owner inside.
  echo "--- the workspace's owner on disk"
  ws=$(find "$data/tenants" -name hello.txt -printf '%h\n' | head -n 1)
  unit_user=$(systemctl show -p User --value "$unit")
  unit_owner=$(id -u "${unit_user:-root}"):$(id -g "${unit_user:-root}")
  dir_owner=$(stat -c %u:%g "$ws")
  file_owner=$(stat -c %u:%g "$ws/hello.txt")
  echo "workspace $ws: directory $dir_owner, hello.txt $file_owner, the unit's user $unit_owner"
  journalctl -b -u "$unit" --no-pager -o cat | grep -m 1 -E 'workspaces under .* are (mounted idmapped|chowned)' || true
  if [ "$unit" = pyjail ]; then
    if [ "$dir_owner" != "$unit_owner" ] || [ "$file_owner" != "$unit_owner" ]; then
      echo "FAIL: under the root unit the workspace was chowned, not idmapped"
      exit 1
    fi
  elif [ "$dir_owner" != "$file_owner" ] || [ "$file_owner" = "$unit_owner" ]; then
    echo "FAIL: the rootless unit's workspace is neither chowned to the sandbox nor consistent"
    exit 1
  fi
  echo "owner as expected for $unit"
  echo "--- the server killed mid-call (SIGKILL to the unit's main process)"
  main=$(systemctl show -p MainPID --value "$unit")
  mcp -o /dev/null --max-time 60 -d '{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"run_python","arguments":{"code":"import time\ntime.sleep(30)"}}}' &
  sleep 3
  kill -KILL "$main"
  wait || true
  # Restart=on-failure starts it again after RestartSec=2s; the new
  # server sweeps what the old one left.
  for _ in $(seq 120); do
    now=$(systemctl show -p MainPID --value "$unit")
    [ "$now" != 0 ] && [ "$now" != "$main" ] && curl -fs http://127.0.0.1:9090/readyz >/dev/null && break
    sleep 1
  done
  echo "restarted: main pid $main -> $now, restarts $(systemctl show -p NRestarts --value "$unit")"
  mcp_open
  mcp -d '{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"run_python","arguments":{"code":"print(6*7)"}}}' | tee /tmp/calc2
  echo
  grep -q '42' /tmp/calc2
  # Nothing of the killed server is left: a jail's cgroup is named
  # pj-<server pid>-..., and every one must belong to a live server (the
  # sweep at the restart removes the others, and PR_SET_PDEATHSIG has
  # killed their processes).
  for d in "/sys/fs/cgroup$cg"/jails/pj-* /sys/fs/cgroup/pyjail/pj-*; do
    [ -d "$d" ] || continue
    owner=$(basename "$d" | cut -d- -f2)
    if [ ! -d "/proc/$owner" ]; then
      echo "left by the killed server (pid $owner): $d, processes: $(tr '\n' ' ' <"$d/cgroup.procs")"
      exit 1
    fi
  done
  echo "no jail of the killed server is left"
  echo "--- journal"
  journalctl -u "$unit" --no-pager -o cat | tail -n 15
  systemctl stop "$unit"
  echo "--- stopped: $(systemctl show -p Result --value "$unit"), exit status $(systemctl show -p ExecMainStatus --value "$unit")"
  # systemd removes the unit's cgroup once it is empty; any jail left
  # behind would keep it.
  if [ -d "/sys/fs/cgroup$cg" ]; then
    echo "the unit's cgroup is still there after the stop:"
    find "/sys/fs/cgroup$cg" -type d
    exit 1
  fi
  echo "the unit's cgroup is gone: no jail outlived the server"
  # The root unit's jails live at the top-level cgroup_parent instead.
  if compgen -G "/sys/fs/cgroup/pyjail/pj-*" >/dev/null; then
    echo "jail cgroups left in /sys/fs/cgroup/pyjail:"
    ls /sys/fs/cgroup/pyjail
    exit 1
  fi
  exit 0
fi

# A user-namespaced pod, simulated as its runtime would make it: a cgroup
# chowned to the pod's root (host uid 400000000) and its user namespace
# mapping 0-65535 to 400000000 on, made with unshare. pyjail is root there
# without having entered rootless mode: the case of deploy/kubernetes.
if [ "${1:-}" = --pod-unit ]; then
  set -e
  cg=$(sed -n 's/^0:://p' /proc/self/cgroup)
  pod=/sys/fs/cgroup$cg/pod
  mkdir "$pod"
  echo $$ >"$pod/cgroup.procs"
  echo "+cpu +memory +pids" >"/sys/fs/cgroup$cg/cgroup.subtree_control"
  chown 400000000:400000000 "$pod" "$pod/cgroup.procs" "$pod/cgroup.subtree_control" "$pod/cgroup.threads"
  state=/run/pyjail-pod
  rm -rf "$state"
  install -d -m 0755 -o 400000000 -g 400000000 "$state" "$state/ws"
  printf '{"state_dir": "%s/state"}\n' "$state" >"$state/config.json"
  # unshare (util-linux 2.38) maps a range through newuidmap, which
  # checks the caller's subordinate ranges, root's included.
  grep -q '^root:400000000:' /etc/subuid 2>/dev/null || usermod --add-subuids 400000000-400065535 --add-subgids 400000000-400065535 root
  inpod() {
    unshare --user --mount --map-users=400000000,0,65536 --map-groups=400000000,0,65536 --setuid 0 --setgid 0 -- "$@"
  }
  echo "--- uid_map in the pod: $(inpod cat /proc/self/uid_map | tr -s ' ' | tr '\n' ';')"
  echo "--- pyjail doctor --start-jail in the pod"
  inpod "$work/pyjail" doctor --start-jail --config "$state/config.json" --rootfs /var/lib/pyjail/rootfs --data-dir "$state" 2>&1 | sed 's/^/    /'
  rc=${PIPESTATUS[0]}
  echo "doctor exit $rc"
  [ "$rc" = 0 ]
  echo "--- pyjail run (workspace) in the pod"
  inpod "$work/pyjail" run --config "$state/config.json" --rootfs /var/lib/pyjail/rootfs --profile full --workspace "$state/ws" \
    -c 'import os; open("made-in-pod.txt", "w").write("hi"); print("uid", os.getuid(), sorted(os.listdir(".")))'
  echo "--- the workspace on the host (numeric owners)"
  find "$state/ws" -printf "%U:%G %m %p\n"
  echo "--- cgroups: $(find "$pod" -mindepth 1 -maxdepth 2 -type d | sed "s|/sys/fs/cgroup||" | tr '\n' ' ')"

  # The pod of deploy/kubernetes: only CHOWN, DAC_OVERRIDE, FOWNER, SETGID
  # and SETUID (the bounding set), and no_new_privs
  # (allowPrivilegeEscalation: false).
  inpod5() {
    inpod setpriv --bounding-set=-all,+chown,+dac_override,+fowner,+setgid,+setuid --inh-caps=-all --no-new-privs -- "$@"
  }
  echo "--- the five-capability pod: $(inpod5 grep -E '^(CapEff|NoNewPrivs)' /proc/self/status | tr -s '\t\n' '  ')"
  inpod5 "$work/pyjail" doctor --start-jail --config "$state/config.json" --rootfs /var/lib/pyjail/rootfs --data-dir "$state" >/tmp/doctor5 2>&1
  rc=$?
  grep -E '^(root|rootless_cgroup|uid_range|start_jail|All|[0-9]+ required)' /tmp/doctor5 | sed 's/^/    /'
  echo "doctor exit $rc"
  [ "$rc" = 0 ] || { cat /tmp/doctor5; exit 1; }
  echo "--- a workspace below a 0700 directory: refused, saying what to change"
  install -d -m 0700 -o 400000000 -g 400000000 "$state/private" "$state/private/ws"
  if inpod5 "$work/pyjail" run --config "$state/config.json" --rootfs /var/lib/pyjail/rootfs --profile full --workspace "$state/private/ws" -c 'print(1)' >/tmp/run5 2>&1; then
    echo "ran, but should have been refused:"; cat /tmp/run5; exit 1
  fi
  sed 's/^/    /' /tmp/run5
  grep -q 'chmod o+x' /tmp/run5
  chmod o+x "$state/private"
  inpod5 "$work/pyjail" run --config "$state/config.json" --rootfs /var/lib/pyjail/rootfs --profile full --workspace "$state/private/ws" \
    -c 'import os; open("five.txt", "w").write("5"); print("after chmod o+x: uid", os.getuid(), os.getgroups(), sorted(os.listdir(".")))'
  echo "--- pyjail serve --http in the five-capability pod: forked calc, a container for the workspace"
  rm -f "$state/tokens.json"
  token=$("$work/pyjail" token add pod --tokens "$state/tokens.json" 2>/dev/null)
  chown 400000000:400000000 "$state/tokens.json"
  install -d -m 0755 -o 400000000 -g 400000000 "$state/data"
  inpod5 "$work/pyjail" serve --config "$state/config.json" --rootfs /var/lib/pyjail/rootfs --http 127.0.0.1:8181 \
    --metrics 127.0.0.1:9191 --tokens "$state/tokens.json" --data-dir "$state/data" >/tmp/serve5 2>&1 &
  server=$!
  for _ in $(seq 180); do curl -fs http://127.0.0.1:9191/readyz >/dev/null && break; sleep 1; done
  mcp_url=http://127.0.0.1:8181/mcp
  mcp_open || { cat /tmp/serve5; exit 1; }
  # Until the calc fork server is up (it preloads numpy and pandas: tens
  # of seconds under TCG), runs are cold; then they must be forked.
  forked=
  for i in $(seq 2 40); do
    mcp -d '{"jsonrpc":"2.0","id":'"$i"',"method":"tools/call","params":{"name":"run_python","arguments":{"code":"print(6*7)"}}}' >/tmp/calc5
    grep -q '42' /tmp/calc5 || { cat /tmp/calc5; exit 1; }
    start=$(sed -n 's/.*"start":"\([a-z]*\)".*/\1/p' /tmp/calc5)
    echo "run_python $i: 42, start $start"
    if [ "$start" = warm ] || [ "$start" = forked ]; then forked=1; break; fi
    sleep 3
  done
  [ -n "$forked" ] || { echo "calc never ran forked"; cat /tmp/serve5; exit 1; }
  mcp -d '{"jsonrpc":"2.0","id":100,"method":"tools/call","params":{"name":"run_sandbox_code","arguments":{"code":"open(\"w.txt\", \"w\").write(\"w\")\nprint(open(\"w.txt\").read())"}}}' | tee /tmp/ws5
  echo
  grep -q '"verdict":"ok"' /tmp/ws5
  echo "tenant directories: $(find "$state/data/tenants" -maxdepth 2 -printf '%m %P, ')"
  kill -TERM "$server"
  wait "$server" || true
  grep -E 'user namespace|level=(WARN|ERROR)' /tmp/serve5 | cut -c1-300 | sed 's/^/    /'
  exit 0
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

# dist's units, for real: installed as a user would install them
# (dist/README.md), started by systemd, called over HTTP with a token,
# stopped: the root unit, then the rootless one (the hook of the rootless
# pass made the user pyjail).
for unit in pyjail pyjail-rootless; do
  [ -f "$in/$unit.service" ] || continue
  data=/var/lib/pyjail
  [ "$unit" = pyjail-rootless ] && data=/var/lib/pyjail/rootless
  bash "$in/guest.sh" --service "$unit" "$data" >"$out/$unit.service.txt" 2>&1
  echo $? >"$out/$unit.service.rc"
  echo "$unit.service: exit $(cat "$out/$unit.service.rc")"
done

if [ "${VM_POD:-1}" = 1 ]; then
  systemd-run --quiet --wait --pipe --collect --unit=pyjail-test-pod -p Delegate=yes -p Type=exec \
    /bin/bash "$in/guest.sh" --pod-unit </dev/null >"$out/pod.txt" 2>&1
  echo $? >"$out/pod.rc"
  echo "user-namespaced pod: exit $(cat "$out/pod.rc")"
fi

echo "pyjail-vm: done at $(cut -d' ' -f1 /proc/uptime)s uptime"
date -u +%FT%TZ >"$out/done"
sync
