#!/usr/bin/env bash
# Packages the VM test's Debian 12 system as a local Vagrant box for the
# libvirt provider and adds it as pyjail/bookworm-v2, for hosts where no
# box can be downloaded. Run as root; needs vagrant, vagrant-libvirt and
# qemu-utils.
#
#   bash test/vm/vagrant-box.sh
#   PYJAIL_VAGRANT_BOX=pyjail/bookworm-v2 PYJAIL_LIBVIRT_DRIVER=qemu \
#     vagrant up --provider libvirt
#
# The box has no boot loader: its own Vagrantfile boots the host's Debian
# kernel and initrd directly (libvirt's <kernel>/<initrd>), as the VM test
# does, so it works on the machine that made it and nowhere else. Users
# elsewhere keep the Vagrantfile's default, debian/bookworm64.
set -euo pipefail

log() { printf '\033[1m[vagrant-box]\033[0m %s\n' "$*" >&2; }
here=$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")
NAME=${VAGRANT_BOX_NAME:-pyjail/bookworm-v2}
CACHE=${VM_CACHE:-/var/cache/pyjail/vm}

image=$(bash "$here/image.sh" box)
kver=$(sed -n 's/^kernel linux-image-\([^=]*\)=.*/\1/p' "${image%.img}.recipe")
tmp=$(mktemp -d "$CACHE/.box-XXXXXX")
trap 'rm -rf "$tmp"' EXIT

log "converting $image to qcow2"
qemu-img convert -O qcow2 "$image" "$tmp/box.img"
size=$(($(stat -c %s "$image") / 1024 / 1024 / 1024))
printf '{"provider": "libvirt", "format": "qcow2", "virtual_size": %d}\n' "$size" >"$tmp/metadata.json"
cat >"$tmp/Vagrantfile" <<EOF
# The box of test/vm/vagrant-box.sh: no boot loader, the host's kernel.
Vagrant.configure("2") do |config|
  config.vm.provider "libvirt" do |lv|
    lv.kernel = "/boot/vmlinuz-$kver"
    lv.initrd = "/boot/initrd.img-$kver"
    lv.cmd_line = "root=/dev/vda rw console=ttyS0 systemd.unified_cgroup_hierarchy=1"
  end
end
EOF
tar -C "$tmp" -cf "$tmp/pyjail.box" metadata.json Vagrantfile box.img
vagrant box add --force --name "$NAME" "$tmp/pyjail.box" >&2
log "added $NAME (kernel $kver)"
