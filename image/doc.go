// Package image assembles pyjail's OCI container image from what the
// project already builds, without a container engine or daemon:
//
//  1. the base layer, a minimal Debian tree that mmdebstrap wrote as a tar
//     (scripts/image-base.sh), normalised: numeric owners only, mtimes
//     clamped to the build epoch, no atime or ctime records;
//  2. the pyjail binary at /usr/local/bin/pyjail;
//  3. the built, verified Python rootfs at /var/lib/pyjail/rootfs, read
//     from its directory and never written, owners kept as on disk, mtimes
//     clamped (not replaced: the bytecode caches Debian ships record the
//     source's mtime, and a changed one would make every import recompile);
//
// then the image config (entrypoint, ports, labels) and the manifest's OCI
// annotations, written as an OCI layout and as an oci-archive. Every input
// and the epoch (SOURCE_DATE_EPOCH) decide the bytes: the same inputs give
// the same digest.
//
// It is built on go-containerregistry's v1 packages (mutate, tarball,
// layout) and links nothing of the rest of the project: it only reads
// files, and it never starts a jail.
package image
