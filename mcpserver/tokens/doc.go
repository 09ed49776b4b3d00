// Package tokens holds the bearer tokens of pyjail's HTTP service (SPEC
// §10): the tokens file that names each tenant, the sha256 of its token and
// its quota overrides, and the [Store] that authenticates requests against
// it and reloads it when it changes.
//
// # The tokens file
//
// Only digests are stored: an entry holds the lowercase hex sha256 of the
// exact bytes a client sends after "Bearer ". Two formats share one data
// model, and [Parse] tells them apart by the first byte that is not white
// space: "{" starts a JSON document, anything else is the line format.
//
// JSON, what `pyjail token add` writes to a file whose name ends in .json
// (the default, /etc/pyjail/tokens.json):
//
//	{
//	  "tenants": [
//	    {"tenant": "alice", "sha256": "9f86d08…", "operator": true},
//	    {"tenant": "bob", "sha256": "60303ae…", "quota": {"runs_per_minute": 30}}
//	  ]
//	}
//
// The line format, for hand editing and for files of other names (the
// Kubernetes Secret's "tokens" key): one entry per line, fields separated
// by white space, "#" to the end of the line is a comment:
//
//	# tenant  sha256                quota overrides
//	alice     9f86d08…              operator=true
//	bob       60303ae…              runs_per_minute=30 workspace_bytes=1GiB
//
// A tenant name is 1 to 63 characters of [a-z0-9_-] starting with a letter
// or digit, because it becomes a directory name under
// --data-dir/tenants/. Each tenant and each digest appears once, and the
// digest of the empty token is refused. The quota keys are
// concurrent_runs, runs_per_minute, workspace_bytes, workspace_files,
// snapshots and snapshot_bytes; all are optional, and 0 (or absent) means
// the server's default. egress_hosts (a JSON list, or comma-separated in
// the line format; empty: no host) narrows the tenant's egress allowlists
// (SPEC §12). In the line format operator=true|false is one more key, and the *_bytes keys also take KiB, MiB, GiB and TiB suffixes.
// Unknown keys and fields are errors. [Parse] reports every bad line or
// entry at once, each error naming its line (and, in JSON, its entry), and
// never repeats a digest field's value: a token pasted where its digest
// belongs must not end up in a log.
//
// Rewrites ([Add], [Remove]) keep the file's format, mode and owner, keep
// the comments and blank lines of a line-format file, and replace the file
// atomically and durably (temporary file, fsync, rename, fsync of the
// directory) under an exclusive lock on its directory, so two concurrent
// `pyjail token` commands cannot lose each other's change.
//
// # Authentication and reloading
//
// [Store.Authenticate] hashes the presented token and compares the digest
// with every entry's in constant time (crypto/subtle), without stopping at
// a match, so timing reveals neither which entry matched nor how much of
// any digest did.
// The set of entries is replaced as a whole on reload, so a request sees
// either the old set or the new one.
//
// [Store.Reload] rereads the file; the caller wires it to SIGHUP.
// [Store.Watch] polls the file's contents every few seconds and reloads
// once a change has been the same for two polls in a row, so a file caught
// half-written by an editor is never loaded. Polling, not inotify: it
// follows the Kubernetes Secret pattern (the kubelet swaps a "..data"
// symlink in the mounted directory; reading through the path sees the new
// target) without watching directories, works on network filesystems
// where inotify sees no remote change, survives the directory being
// replaced, and needs no dependency. The cost is a read of a small file
// per interval and a delay of at most two intervals. A reload that fails
// (unreadable file, a parse error) keeps the previous set, is logged and
// counted in [Stats], and is not retried until the contents change again.
//
// The package performs no other I/O than reading and writing the tokens
// file, never logs a token or a full digest, and has no dependency on the
// jail, libcontainer or MCP packages: it is plain authentication data that
// the HTTP layer consults.
package tokens
