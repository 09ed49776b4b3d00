// Package packages gives each tenant a layer of Python packages installed
// from the operator's index (SPEC §13), and keeps the wheel cache the
// tenants share.
//
// An install takes these steps, in this order, under the tenant's
// package lock:
//  1. check every requirement string (a name, extras and version
//     specifiers; never a URL, a path or a pip option);
//  2. make a staging directory beside the layer, holding a copy of the
//     current layer and the requirements;
//  3. resolve: pip, run by a Runner in a jail with kernel isolation only
//     and egress to the index host only, reports what it would install
//     (--dry-run --report), wheels only unless the operator allows builds;
//  4. fetch: the wheels the shared cache holds are copied into the staging
//     directory after their sha256 is checked again; in a second jail pip
//     downloads the others, checking the index's hashes, and installs all
//     of them into the staged layer with --require-hashes;
//  5. check the staged layer against the tenant's quotas (bytes and
//     distributions), store the new wheels in the cache under their
//     sha256, and harden the layer (root-owned, read-only, no special
//     files, no set-id bits);
//  6. swap the staged layer in atomically and remove the old one.
//
// Removal copies the layer without the named distributions (their RECORD
// files, each path confined to the layer) and swaps it in the same way.
//
// The package runs no pip and no Python on the host, never reads what a
// jail wrote by following a symlink, and imports neither libcontainer nor
// the MCP library: package jail runs the jails and package mcpserver
// serves the tools.
package packages
