#!/usr/bin/env bash
# Builds (or finds in the cache) the disks of the cgroup v2 test VM and
# prints the path on stdout. Run as root.
#
#   test/vm/image.sh              # the guest system disk
#   test/vm/image.sh --key        # its cache key only
#   test/vm/image.sh rootfs DIR   # a disk holding the Python rootfs DIR
#   test/vm/image.sh box          # the same Debian system as a Vagrant
#                                 # box's disk (test/vm/vagrant-box.sh)
#
# The guest disk is a plain ext4 filesystem (no partition table) holding
# a Debian 12 system made by mmdebstrap from the host's apt sources:
# systemd as PID 1 on the unified cgroup hierarchy, the modules of the
# host's Debian kernel, and a oneshot unit that runs the test script the
# host shares at boot. Nothing of pyjail is in it: the binaries and the
# test script come in over 9p at every boot, so a code change never
# rebuilds it. Its cache key is a hash of everything it is made from:
# this script, the kernel package, the mmdebstrap version, the package
# list and the apt sources.
#
# The rootfs disk is an ext4 copy of a built rootfs (`pyjail rootfs
# build`), keyed by the rootfs's manifest and tree listing, so it follows
# the rootfs and not this script. It is a disk rather than a 9p share of
# the host's tree because under TCG every 9p request is an emulated
# round trip: a cold `pyjail rootfs verify` took 71 s over 9p and 30 s
# from the disk, and the first jail of a pass (metadata check plus
# imports) 74 s against 9 s.
#
# qemu opens both with snapshot=on, so runs never write to them.
#
# Environment: VM_CACHE (default /var/cache/pyjail/vm), VM_KERNEL_VERSION
# (default: the one linux-image-amd64 depends on).
set -euo pipefail

log() { printf '\033[1m[vm-image]\033[0m %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }

SUITE=bookworm
CACHE=${VM_CACHE:-/var/cache/pyjail/vm}
SELF=$(readlink -f "${BASH_SOURCE[0]}")

[ "$(id -u)" = 0 ] || die "must run as root (mmdebstrap --mode=root, chroot, depmod)"
mkdir -p "$CACHE"
exec 9>"$CACHE/.lock"
flock 9

# rootfs_disk DIR: the ext4 copy of the rootfs in DIR.
rootfs_disk() {
  local dir=$1 key disk
  for f in .pyjail-manifest.json .pyjail-tree; do
    [ -r "$dir/$f" ] || die "no built rootfs in $dir (missing $f): make rootfs"
  done
  key=$(cat "$dir/.pyjail-manifest.json" "$dir/.pyjail-tree" | sha256sum | cut -c1-16)
  disk=$CACHE/rootfs-$key.img
  if [ -f "$disk" ]; then
    log "cached: $disk"
    echo "$disk"
    return
  fi
  local start tmp
  start=$(date +%s)
  tmp=$(mktemp "$CACHE/.rootfs-XXXXXX")
  # Size: the tree plus a quarter for ext4's metadata; no lost+found,
  # which the rootfs's own verification would name as an added entry.
  local mib=$(($(du -sm "$dir" | cut -f1) * 5 / 4 + 64))
  mke2fs -q -t ext4 -L pjrootfs -d "$dir" -E root_owner=0:0 "$tmp" "${mib}M" >/dev/null
  debugfs -w -R "rmdir lost+found" "$tmp" >/dev/null 2>&1
  mv "$tmp" "$disk"
  for old in "$CACHE"/rootfs-*.img; do
    [ "$old" = "$disk" ] || rm -f "$old"
  done
  log "rootfs disk of $dir in $(($(date +%s) - start)) s: $disk"
  echo "$disk"
}
if [ "${1:-}" = rootfs ]; then
  rootfs_disk "${2:?usage: image.sh rootfs DIR}"
  exit 0
fi

# The flavour: the test guest, or a Vagrant box's disk (sshd, a vagrant
# user with Vagrant's well-known key, DHCP on the NIC, no test unit).
flavor=guest
if [ "${1:-}" = box ]; then
  flavor=box
  shift
fi

# The kernel: the host's Debian kernel package, the one the metapackage
# points at unless told otherwise. Its initrd was made on the host by
# initramfs-tools with MODULES=most, which includes virtio_blk and ext4.
kver=${VM_KERNEL_VERSION:-}
if [ -z "$kver" ]; then
  kver=$(dpkg-query -W -f='${Depends}' linux-image-amd64 2>/dev/null |
    grep -o 'linux-image-[^ ,]*-amd64' | head -1 | sed 's/^linux-image-//') ||
    true
fi
[ -n "$kver" ] || die "no Debian kernel on the host: apt-get install linux-image-amd64"
for f in "/boot/vmlinuz-$kver" "/boot/initrd.img-$kver" "/lib/modules/$kver/modules.dep"; do
  [ -r "$f" ] || die "missing $f: apt-get install --reinstall linux-image-$kver"
done
kpkg=$(dpkg-query -W -f='${Package}=${Version}' "linux-image-$kver")

# The apt sources of the host that serve this suite (a sources.list line
# or a deb822 stanza naming bookworm, bookworm-updates or
# bookworm-security); third-party repositories for other suites stay out.
sources=()
for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
  [ -f "$f" ] || continue
  grep -Eq "^[^#]*(^|[[:space:]])$SUITE(-[a-z]+)?([[:space:]]|$)" "$f" && sources+=("$f")
done
[ ${#sources[@]} -gt 0 ] || die "no apt source for $SUITE in /etc/apt"

# The packages of the guest: systemd and what systemd-run --wait needs
# (dbus), kmod for the 9p modules, libseccomp2 for the cgo binaries,
# procps and util-linux for the test script, passwd (useradd, usermod)
# and uidmap (newuidmap, newgidmap) for the rootless pass, curl for its
# HTTP service check, dbus-user-session for the desktop user's own bus
# (systemd-run --user, as on a desktop).
PACKAGES=(systemd systemd-sysv udev dbus dbus-user-session kmod libseccomp2 procps util-linux passwd uidmap curl)
# A box is logged into over ssh, provisioned with apt and synced with rsync.
[ "$flavor" = box ] && PACKAGES+=(openssh-server sudo rsync systemd-resolved ca-certificates apt)

recipe() {
  echo "flavor $flavor"
  echo "script $(sha256sum "$SELF" | cut -d' ' -f1)"
  echo "kernel $kpkg"
  echo "mmdebstrap $(dpkg-query -W -f='${Version}' mmdebstrap)"
  echo "packages ${PACKAGES[*]}"
  for f in "${sources[@]}"; do
    echo "source $f $(grep -v '^[[:space:]]*#' "$f" | sha256sum | cut -d' ' -f1)"
  done
  if [ "$flavor" = box ] && compgen -G "/usr/local/share/ca-certificates/*.crt" >/dev/null; then
    echo "local CAs $(cat /usr/local/share/ca-certificates/*.crt | sha256sum | cut -d' ' -f1)"
  fi
}
key=$(recipe | sha256sum | cut -c1-16)
if [ "${1:-}" = --key ]; then
  echo "$key"
  exit 0
fi
image=$CACHE/$flavor-$key.img
if [ -f "$image" ]; then
  log "cached: $image"
  echo "$image"
  exit 0
fi

log "building $image (kernel $kver)"
start=$(date +%s)
tmp=$(mktemp -d "$CACHE/.build-XXXXXX")
cleanup() {
  # mmdebstrap unmounts what it mounted even on failure; a leftover
  # mount under the tree would make rm walk into the host.
  if ! grep -q " $tmp/" /proc/self/mounts; then rm -rf "$tmp"; fi
}
trap cleanup EXIT
root=$tmp/root

# Documentation, manuals and translations are dead weight in a test VM.
mmdebstrap --mode=root --variant=essential --quiet \
  --include="$(IFS=,; echo "${PACKAGES[*]}")" \
  --aptopt='Acquire::Languages "none"' \
  --dpkgopt='path-exclude=/usr/share/doc/*' \
  --dpkgopt='path-exclude=/usr/share/man/*' \
  --dpkgopt='path-exclude=/usr/share/locale/*' \
  -- "$SUITE" "$root" "${sources[@]}"

# The kernel's modules, without the hardware this VM has none of (GPUs,
# sound, wireless, USB, media, ...): the filesystems and network stack
# (9p, overlay, netfilter) and the virtio drivers.
mdir=lib/modules/$kver
mkdir -p "$root/$mdir/kernel/drivers/net"
cp -a "/$mdir/modules.order" "/$mdir/modules.builtin" "/$mdir/modules.builtin.modinfo" "$root/$mdir/"
for d in fs net lib crypto arch mm block virt drivers/virtio drivers/block drivers/char; do
  if [ -d "/$mdir/kernel/$d" ]; then
    mkdir -p "$root/$mdir/kernel/$(dirname "$d")"
    cp -a "/$mdir/kernel/$d" "$root/$mdir/kernel/$d"
  fi
done
cp -a "/$mdir"/kernel/drivers/net/virtio_net.ko* "/$mdir"/kernel/drivers/net/net_failover.ko* "$root/$mdir/kernel/drivers/net/"
depmod -b "$root" "$kver"

if [ "$flavor" = box ]; then
  echo pyjail >"$root/etc/hostname"
  printf '127.0.0.1 localhost\n127.0.1.1 pyjail\n' >"$root/etc/hosts"
  echo "/dev/vda / ext4 rw,noatime 0 1" >"$root/etc/fstab"
  # Vagrant's conventions: user vagrant, password-less sudo, and its
  # well-known public key (Vagrant replaces it on the first `vagrant up`).
  chroot "$root" useradd --create-home --shell /bin/bash --uid 1000 vagrant
  echo 'vagrant ALL=(ALL) NOPASSWD: ALL' >"$root/etc/sudoers.d/vagrant"
  chmod 0440 "$root/etc/sudoers.d/vagrant"
  pub=$(find /usr/share/rubygems-integration /usr/lib/ruby /opt/vagrant -path '*/keys/vagrant.pub' 2>/dev/null | head -1) || true
  [ -n "$pub" ] || die "Vagrant's public key not found: apt-get install vagrant"
  install -d -m 0700 -o 1000 -g 1000 "$root/home/vagrant/.ssh"
  install -m 0600 -o 1000 -g 1000 "$pub" "$root/home/vagrant/.ssh/authorized_keys"
  echo 'UseDNS no' >"$root/etc/ssh/sshd_config.d/vagrant.conf"
  # A box made for this host trusts what its administrator added to the
  # host's trust store (a TLS-intercepting proxy's CA, for one): without
  # it, the provisioning's download of Go fails on such a host.
  if compgen -G "/usr/local/share/ca-certificates/*.crt" >/dev/null; then
    cp /usr/local/share/ca-certificates/*.crt "$root/usr/local/share/ca-certificates/"
    chroot "$root" update-ca-certificates >/dev/null
  fi
  # DHCP on whatever the NIC is called; resolved takes the DNS server.
  cat >"$root/etc/systemd/network/80-dhcp.network" <<'EOF'
[Match]
Name=en* eth*

[Network]
DHCP=yes
EOF
  mkdir -p "$root/etc/systemd/system/multi-user.target.wants"
  ln -sf /lib/systemd/system/systemd-networkd.service "$root/etc/systemd/system/multi-user.target.wants/"
  ln -sf /lib/systemd/system/systemd-resolved.service "$root/etc/systemd/system/multi-user.target.wants/"
  ln -sf /run/systemd/resolve/resolv.conf "$root/etc/resolv.conf"
  # Every box would share these host keys; a box made here stays here.
  rm -f "$root"/etc/ssh/ssh_host_*
  cat >"$root/etc/systemd/system/ssh-keygen-once.service" <<'EOF'
[Unit]
Description=Generate the ssh host keys of this machine
Before=ssh.service
ConditionPathExists=!/etc/ssh/ssh_host_ed25519_key

[Service]
Type=oneshot
ExecStart=/usr/bin/ssh-keygen -A

[Install]
WantedBy=multi-user.target
EOF
  ln -sf ../ssh-keygen-once.service "$root/etc/systemd/system/multi-user.target.wants/"
else
  # What test/vm/run.sh attaches at every boot: the rootfs disk, and two 9p
  # shares, the test inputs (read-only; cache=loose keeps them in the guest,
  # nothing changes them while the VM runs) and the results (read-write).
  p9=trans=virtio,version=9p2000.L,msize=512000
  cat >"$root/etc/fstab" <<EOF
/dev/vda  /                      ext4  rw,noatime                 0 1
/dev/vdb  /var/lib/pyjail/rootfs ext4  ro,noatime,nofail          0 0
pjin      /mnt/in                9p    ro,$p9,cache=loose         0 0
pjout     /mnt/out               9p    rw,$p9                     0 0
EOF
  mkdir -p "$root/mnt/in" "$root/mnt/out" "$root/var/lib/pyjail/rootfs"
  printf '9pnet_virtio\n9p\n' >"$root/etc/modules-load.d/9p.conf"
  # qemu's "max" CPU offers SVM, and udev would load kvm_amd, which needs
  # a crypto driver this image leaves out: noise and boot time for nothing.
  printf 'blacklist kvm_amd\nblacklist kvm_intel\nblacklist kvm\n' >"$root/etc/modprobe.d/pyjail-vm.conf"
  echo pyjail-vm >"$root/etc/hostname"
  printf '127.0.0.1 localhost\n127.0.1.1 pyjail-vm\n' >"$root/etc/hosts"
  # The unit that runs the test script and powers the VM off whatever
  # happens: the host's time bound is the only other way out.
  cat >"$root/etc/systemd/system/pyjail-vmtest.service" <<'EOF'
[Unit]
Description=pyjail VM test (script from the host's 9p share)
After=local-fs.target systemd-modules-load.service
RequiresMountsFor=/mnt/in /mnt/out
SuccessAction=poweroff-force
FailureAction=poweroff-force

[Service]
Type=oneshot
ExecStart=/bin/bash /mnt/in/guest.sh
StandardOutput=journal+console
StandardError=journal+console
TimeoutStartSec=infinity

[Install]
WantedBy=multi-user.target
EOF
  mkdir -p "$root/etc/systemd/system/multi-user.target.wants"
  ln -sf ../pyjail-vmtest.service "$root/etc/systemd/system/multi-user.target.wants/pyjail-vmtest.service"
  # Nothing else needs to start: no logins, no timers. The console's getty
  # (which systemd adds for console=ttyS0) logs root in without a password
  # for `VM_SHELL=1 test/vm/run.sh`; test runs mask it on the kernel command
  # line, and shell runs mask the test unit instead.
  for u in getty@tty1.service apt-daily.timer apt-daily-upgrade.timer \
    e2scrub_all.timer fstrim.timer systemd-timesyncd.service; do
    ln -sf /dev/null "$root/etc/systemd/system/$u"
  done
  mkdir -p "$root/etc/systemd/system/serial-getty@ttyS0.service.d"
  cat >"$root/etc/systemd/system/serial-getty@ttyS0.service.d/autologin.conf" <<'EOF'
[Service]
ExecStart=
ExecStart=-/sbin/agetty --autologin root --noclear --keep-baud 115200,57600,38400,9600 %I $TERM
EOF
fi
# An empty machine-id makes systemd generate one at boot (read-only
# image: qemu's snapshot=on discards it).
: >"$root/etc/machine-id"
rm -rf "$root/var/cache/apt/archives/"*.deb "$root/var/lib/apt/lists/"*

# ext4 populated straight from the tree (mke2fs -d): no loop device.
# Sparse: 2 GiB for the test guest, whose writes land in qemu's temporary
# overlay; 20 GiB for a box, which builds pyjail and its rootfs.
size=2G
[ "$flavor" = box ] && size=20G
mke2fs -q -t ext4 -L pyjailvm -d "$root" -E root_owner=0:0 "$tmp/image" "$size" >/dev/null
recipe >"$tmp/recipe"
mv "$tmp/recipe" "$CACHE/$flavor-$key.recipe"
mv "$tmp/image" "$image"
# Older images of other recipes only take space.
for old in "$CACHE"/"$flavor"-*.img; do
  [ "$old" = "$image" ] || rm -f "$old" "${old%.img}.recipe"
done
log "built in $(($(date +%s) - start)) s: $image ($(du -h "$image" | cut -f1) used)"
echo "$image"
