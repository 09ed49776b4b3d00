// Package sessionstore keeps the checkpoints of hibernated sessions on
// disk (SPEC §11): Store is the record.CheckpointStore the server gives
// its session pool. It stores bytes and their manifests; it never starts
// a jail and never interprets a checkpoint.
//
// # Layout
//
// A key is "<owner>/<name>". Options.Locate maps the owner to the
// directory its sessions live in (a tenant's <data-dir>/tenants/<t>/sessions,
// the stdio server's <state-dir>/sessions), and under it a checkpoint of
// profile p is
//
//	<dir>/<p>/<name>/manifest.json          what the blob is (JSON, format 1)
//	<dir>/<p>/<name>/checkpoint-<sha256>    the blob, named by its sha256
//	<dir>/<p>/.<name>.hold                  lock file: the session is live (Hold)
//	<dir>/<p>/.<name>.write                 lock file: a Save, Load or Delete is under way
//
// The lock files sit beside the session directory, not in it, because
// Delete removes the directory while other processes may have the lock
// files open: an unlinked lock file would let the next process lock a new
// file while the old one is still held. They start with a dot, which no
// session name can, so no name's directory is another name's lock file.
// Temporary files (".tmp-…") live in the session directory, so each
// rename stays within one directory. Every path is opened through an
// os.Root of the owner's directory, and keys, owners and profiles are
// checked against strict patterns first, so no key, however hostile,
// reaches outside its owner's directory.
//
// # Durability
//
// Save writes the blob to a temporary file, fsyncs it and renames it to
// checkpoint-<sha256>, then fsyncs the directory; only then does it write
// the manifest the same way (temporary file, fsync, rename over
// manifest.json, fsync of the directory), and only after that does it
// remove the blob the old manifest named. The manifest records the blob's
// sha256 and size, and the blob's file name is derived from that sha256,
// never read from the manifest as a path. So at every instant the
// directory holds a manifest and the blob it names:
//
//  1. Before the blob's rename, only a temporary file is new: the old
//     manifest and blob load as before.
//  2. Between the blob's rename and the manifest's, both blobs exist and
//     the old manifest names the old one: the old checkpoint loads. The
//     directory fsync in between makes the new blob's name durable before
//     any manifest can name it.
//  3. After the manifest's rename, the new manifest names the new blob,
//     already durable: the new checkpoint loads. The old blob is removed
//     only once the manifest's rename is durable, so a crash cannot bring
//     back the old manifest without its blob.
//
// The directories a key's first Save creates are fsynced into their
// parents too, so a Save that returned cannot lose its directory. A crash
// leaves at most a temporary file or an unnamed blob behind, which
// the key's next Save or Delete removes. If anything else goes wrong (a
// disk that lies about fsync, an operator's edit, a copy that stopped
// half-way), Load reads no more than the manifest's size plus one byte
// (and no more than Options.MaxBlobBytes) and checks the size and the
// sha256, so the damage is reported as record.ErrCorruptCheckpoint: a
// wrong blob is never returned as the right one.
//
// # Concurrency
//
// A Store is safe for concurrent use. Save and Delete of a key take the
// key's write lock exclusively and Load takes it shared: a
// workspace/dirlock lock on the .write file, which excludes this process's
// other calls and other processes alike, so even concurrent Saves of one
// key on two replicas serialize rather than tear. Hold is a separate lock
// (dirlock's TryLock on the .hold file) that the caller keeps for as long
// as the session is live; it excludes other Holds, not Saves, since the
// holder is the one that saves. Both are open-file-description locks, so a
// process that dies releases them with its descriptors. Where the
// filesystem has no locks (and off Linux, where dirlock has none), they
// exclude within this process only, and the Store logs that once.
//
// The owner quota (Options.OwnerBytes) is checked under a per-owner mutex,
// so it is exact within a process; two replicas saving for one owner at
// the same moment may each see the other's old size.
//
// # Trust
//
// The blob is hostile user data (the runner pickled the user's objects):
// the host never deserialises it, only counts, hashes, stores and returns
// it. The manifest is the host's own writing but lives on a disk others
// may touch, so it is read with a size cap (1 MiB), decoded into a fixed
// struct and checked (format, sha256 shape, size, profile) before its size
// is believed. Owner directories come from Locate and are trusted.
//
// The package needs nothing beyond the standard library, record and
// workspace/dirlock (which brings golang.org/x/sys/unix for its fcntl
// locks): sha256, JSON, os.Root and rename are all it takes, and the one
// lock the project already has covers both kinds of exclusion.
package sessionstore
