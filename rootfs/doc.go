// Package rootfs prepares and describes the directory tree a jail uses as
// its root filesystem, and the mount table that completes it.
//
// Two kinds exist. The "host" rootfs is assembled at startup: an empty
// skeleton with a generated minimal /etc, into which the host's /usr is
// bind-mounted read-only. The "debian" rootfs is a self-contained tree built
// from Debian packages with a manifest that Verify checks.
//
// Preparing a host rootfs takes these steps, in this order:
//  1. create the skeleton directory, owned by root, mode 0755;
//  2. create every mountpoint the jail needs (mountpoints cannot be created
//     later: the jail's root is unprivileged on the host);
//  3. create the merged-/usr symlinks (bin, lib, lib64, sbin);
//  4. generate /etc: passwd and group naming the sandbox user, hosts,
//     a UTC localtime, and copies of ld.so.cache, the alternatives symlinks
//     and the Python, matplotlib and fontconfig configuration;
//  5. validate the result.
//
// The package describes mounts as data; it performs no mount system calls
// and never imports libcontainer: package jail turns a Layout into mounts.
package rootfs
