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
// Building a debian rootfs (Build, as root) takes these steps, in this
// order, in a temporary sibling of the target directory:
//  1. skip the build if the target holds a tree of the same recipe (suite,
//     sources, package lists, RecipeVersion) that passes VerifyMetadata;
//  2. bootstrap the Essential set plus the packages (the default recipe
//     and the operator's, see Recipe) with mmdebstrap (or debootstrap)
//     from the host's apt sources, documentation excluded; a name the
//     archive lacks fails the build with ErrNoPackage naming it;
//  3. read the package database;
//  4. drop the packages only compilers or a display need (DefaultDrop)
//     and everything only they pulled in, then refresh the loader cache;
//  5. prune package-manager state, documentation, translations, pip and
//     the libraries' test suites, then list the Python distributions;
//  6. write /etc as for the host rootfs and create every mountpoint;
//  7. import the scientific stack as the sandbox user;
//  8. harden: remove device nodes, setuid/setgid bits, file capabilities
//     and every group or world write bit; make everything world-readable;
//  9. validate, and check that nothing is writable by the jail's host ids;
//  10. hash the tree and write the manifest and tree listing;
//  11. exchange the new tree with the old one atomically, remove the old.
//
// Verify rehashes a built tree and names what changed; OpenDebian, which
// servers call at startup, compares metadata only (see VerifyMode).
//
// The package describes mounts as data; it performs no mount system calls
// and never imports libcontainer: package jail turns a Layout into mounts.
package rootfs
