#!/usr/bin/env bash
# The Debian base of pyjail's container image (make image): a minimal
# Debian 12 tree from mmdebstrap, written as a tar. Prints the tar's path.
#
# mmdebstrap is reproducible under SOURCE_DATE_EPOCH for the same package
# versions; the tar is cached under a key of everything it is made from
# (this script, the mmdebstrap version, the package list, the apt sources),
# so the same tree serves every image build until one of them changes, and
# a build from a clean tree on another day gets what the archive holds then.
#
#   scripts/image-base.sh OUTDIR      (BASE_EPOCH overrides the epoch)
set -euo pipefail
out=${1:?usage: image-base.sh OUTDIR}
# The base's own epoch: the time of this script's last commit, not the
# image's SOURCE_DATE_EPOCH, so that one base serves every commit until
# the recipe changes (CI keeps it in /var/cache/pyjail/image). The image
# builder clamps every mtime to the image's epoch anyway.
if [ -z "${BASE_EPOCH:-}" ]; then
  BASE_EPOCH=$(git log -1 --format=%ct -- "$0" 2>/dev/null || true)
  BASE_EPOCH=${BASE_EPOCH:-${SOURCE_DATE_EPOCH:?SOURCE_DATE_EPOCH or BASE_EPOCH must be set}}
fi
export SOURCE_DATE_EPOCH=$BASE_EPOCH
SUITE=bookworm
# libseccomp2: pyjail links it (cgo). ca-certificates: sign-in's JWKS and
# introspection fetches over TLS. Nothing else: the jails' Python lives in
# the rootfs layer, and pyjail needs no shell or tool of the base at run time.
PACKAGES=(libseccomp2 ca-certificates)

die() { echo "image-base.sh: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || die "must run as root (mmdebstrap --mode=root)"
command -v mmdebstrap >/dev/null || die "mmdebstrap not found: bash scripts/setup.sh --image"

sources=()
for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
  [ -s "$f" ] && sources+=("$f")
done
[ "${#sources[@]}" -gt 0 ] || die "no apt sources on this host"

recipe() {
  sha256sum "$0" | cut -d' ' -f1
  echo "suite $SUITE epoch $SOURCE_DATE_EPOCH"
  echo "mmdebstrap $(dpkg-query -W -f='${Version}' mmdebstrap)"
  echo "packages ${PACKAGES[*]}"
  for f in "${sources[@]}"; do
    echo "source $f $(grep -v '^[[:space:]]*#' "$f" | sha256sum | cut -d' ' -f1)"
  done
}
key=$(recipe | sha256sum | cut -c1-16)
mkdir -p "$out"
tar=$out/base-$key.tar
if [ -s "$tar" ]; then
  echo "image-base.sh: cached $tar" >&2
  echo "$tar"
  exit 0
fi
start=$(date +%s)
# Documentation, manuals and translations are dead weight in a server
# image; apt's lists and caches mmdebstrap removes itself.
mmdebstrap --mode=root --variant=essential --quiet \
  --include="$(IFS=,; echo "${PACKAGES[*]}")" \
  --aptopt='Acquire::Languages "none"' \
  --dpkgopt='path-exclude=/usr/share/doc/*' \
  --dpkgopt='path-include=/usr/share/doc/*/copyright' \
  --dpkgopt='path-exclude=/usr/share/man/*' \
  --dpkgopt='path-exclude=/usr/share/locale/*' \
  --customize-hook='rm -f "$1"/var/log/dpkg.log "$1"/var/log/apt/* "$1"/var/cache/ldconfig/aux-cache "$1"/etc/machine-id' \
  -- "$SUITE" "$out/.base-$key.tmp.tar" "${sources[@]}"
mv "$out/.base-$key.tmp.tar" "$tar"
# Older bases go: the key changed, they will not be asked for again.
find "$out" -maxdepth 1 -name 'base-*.tar' ! -name "base-$key.tar" -delete
echo "image-base.sh: built $tar in $(( $(date +%s) - start )) s" >&2
echo "$tar"
