// Package dirlock is the cross-process readers–writer lock of one tenant
// directory: the lock that keeps snapshot create, restore and delete apart
// from runs and file writes when several `pyjail serve --http` replicas
// share one data directory (SPEC §10). The session checkpoint store
// (sessionstore) uses it too, one lock file per session key.
//
// A Lock is an in-process sync.RWMutex taken together with an
// open-file-description (OFD) lock, fcntl F_OFD_SETLK, on a lock file in
// the tenant directory. OFD locks belong to an open file, not to a
// process, so they exclude other replicas (NFSv4, most RWX volumes) and,
// unlike POSIX record locks, closing some other descriptor of the same
// file never drops them; a replica that dies releases its locks with its
// descriptors, so a lock is never left held by a dead process.
//
// F_OFD_SETLKW cannot be interrupted by a context, so a wait polls the
// non-blocking F_OFD_SETLK with a capped backoff until the lock is free or
// the context is done. Writers get preference across processes through a
// gate byte: a writer holds the gate while it waits for the readers to
// drain, and a new reader must pass the gate first. TryLock takes the
// lock exclusively without waiting at all, for a claim that must fail
// rather than queue (a session live on another replica).
//
// Where the filesystem has no locks (fcntl fails with ENOLCK, EOPNOTSUPP,
// ENOSYS or EINVAL: NFSv3 without lockd, some FUSE filesystems), Open
// still succeeds, the Lock excludes within this process only, and Err says
// why; the caller must report that, since such a directory is unsafe to
// share between replicas.
//
// The package takes locks and nothing else: it never reads or writes the
// tenant's workspace or snapshots.
package dirlock
