package mcpserver

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/pyjail/pyjail/policy"
	"github.com/pyjail/pyjail/workspace/snapshot"
	"github.com/pyjail/pyjail/workspace/walk"
	"github.com/pyjail/pyjail/workspace/wsfs"
)

// noWorkspace is the tool error of workspace tools on a server without one.
const noWorkspace = "this server has no workspace; the operator starts it with `pyjail serve --workspace DIR` to enable run_sandbox_code and the workspace and snapshot tools"

// noSnapshots is the tool error of snapshot tools without a snapshot store.
const noSnapshots = "this server has no snapshot store; the operator starts it with `pyjail serve --snapshots DIR` to enable snapshots"

// maxReadBytes caps one read_workspace_file call, so that a big file comes
// back in pieces a model can handle.
const maxReadBytes = 1 << 20

// wsError turns a wsfs error into a tool error naming the path, or a host
// error for anything that is not the caller's doing.
func wsError(path string, err error) error {
	switch {
	case errors.Is(err, wsfs.ErrLinkInPath):
		return fmt.Errorf("%w: path %q goes through a symbolic link, and files are never written through one; "+
			"write to the path the link points to instead", errArgs, path)
	case errors.Is(err, wsfs.ErrEscape):
		return fmt.Errorf("%w: path %q is outside the workspace", errArgs, path)
	case errors.Is(err, wsfs.ErrInvalidPath):
		return fmt.Errorf("%w: path %q is not a valid workspace path: %w", errArgs, path, err)
	case errors.Is(err, wsfs.ErrNotFound):
		return fmt.Errorf("%w: no such file or directory in the workspace: %q", errArgs, path)
	case errors.Is(err, wsfs.ErrNotRegular):
		return fmt.Errorf("%w: %q is not a regular file", errArgs, path)
	case errors.Is(err, wsfs.ErrTooLarge), errors.Is(err, wsfs.ErrInvalidRange):
		return fmt.Errorf("%w: %q: %w", errArgs, path, err)
	}
	return fmt.Errorf("accessing workspace path %q: %w", path, err)
}

// limitRefusal is the refusal for a workspace shape limit, in the
// limit's own plain words plus what happened because of it. A limit is
// neither bad arguments nor a host failure: the workspace (or the
// request) is too big, and the message says which limit. It wraps le, so
// that the pipeline counts a tenant's own limit as its quota.
func limitRefusal(le *walk.LimitError, then string) error {
	return &refusal{msg: fmt.Sprintf("%v; %s", le, then), cause: le}
}

// writeFileArgs are write_workspace_file's arguments; Encoding is "utf-8"
// (the default) or "base64", as the schema enforces.
type writeFileArgs struct {
	Path     string `json:"path"`
	Content  string `json:"content"`
	Encoding string `json:"encoding,omitempty"`
	// data is Content decoded (check).
	data []byte
}

// check decodes the content: standard padded base64, as Python's
// base64.b64encode and JS's btoa produce, with surrounding whitespace
// from copy and paste allowed.
func (a *writeFileArgs) check(*Server, *call) string {
	a.data = []byte(a.Content)
	if a.Encoding == "base64" {
		var err error
		if a.data, err = base64.StdEncoding.DecodeString(strings.TrimSpace(a.Content)); err != nil {
			return fmt.Sprintf("content is not valid base64 (encoding=base64): %v", err)
		}
	}
	return ""
}

// writeFile serves write_workspace_file. wsfs writes to a temporary file
// and renames it, so a reader never sees half a file.
func (s *Server) writeFile(ctx context.Context, c *call, a *writeFileArgs) (*mcp.CallToolResult, error) {
	fi, err := c.tenant.ws.WriteFile(ctx, a.Path, a.data)
	var le *walk.LimitError
	switch {
	case errors.As(err, &le) && le.Would:
		return nil, limitRefusal(le, "nothing was written")
	case errors.As(err, &le):
		return nil, limitRefusal(le, "nothing was written; remove files with run_sandbox_code or restore a snapshot first")
	case err != nil:
		return nil, wsError(a.Path, err)
	}
	return structured(fmt.Sprintf("wrote %s (%s, sha256 %s)", fi.Path, policy.FormatBytes(fi.Size), fi.SHA256), fi), nil
}

// readFileArgs are read_workspace_file's arguments.
type readFileArgs struct {
	Path   string `json:"path"`
	Offset int64  `json:"offset"`
	Length *int64 `json:"length,omitempty"`
}

// fileChunk is read_workspace_file's structured content.
type fileChunk struct {
	Path     string `json:"path"`
	Size     int64  `json:"size"`
	Offset   int64  `json:"offset"`
	Length   int    `json:"length"`
	EOF      bool   `json:"eof"`
	Encoding string `json:"encoding"`
	Content  string `json:"content"`
}

// readFile serves read_workspace_file. Text that is valid UTF-8 comes back
// as is, anything else as base64, and the structured content says which, so
// a client can always reassemble the exact bytes.
func (s *Server) readFile(_ context.Context, c *call, a *readFileArgs) (*mcp.CallToolResult, error) {
	length := int64(maxReadBytes)
	if a.Length != nil {
		length = min(*a.Length, maxReadBytes)
	}
	data, size, err := c.tenant.ws.ReadFile(a.Path, a.Offset, length)
	if err != nil {
		return nil, wsError(a.Path, err)
	}
	// The content travels twice (text and structured content) and JSON
	// escaping can make text six times longer ("\u0001"): a chunk of
	// text is shortened until it fits the answer, and the caller reads on
	// from where it ends. Base64 is never more than 4/3.
	data = fitChunk(data, int(s.limits.AnswerBytes-64<<10)/2)
	ch := fileChunk{Path: a.Path, Size: size, Offset: a.Offset, Length: len(data), EOF: a.Offset+int64(len(data)) >= size}
	if utf8.Valid(data) {
		ch.Encoding, ch.Content = "utf-8", string(data)
	} else {
		ch.Encoding, ch.Content = "base64", base64.StdEncoding.EncodeToString(data)
	}
	// A whole text file reads best bare; anything partial or binary gets a
	// header saying what the model is looking at and how to go on.
	text := ch.Content
	if ch.Encoding == "base64" || !ch.EOF || ch.Offset > 0 {
		text = fmt.Sprintf("%s: bytes %d to %d of %d (%s):\n%s", ch.Path, ch.Offset, ch.Offset+int64(ch.Length), ch.Size, ch.Encoding, ch.Content)
		if !ch.EOF {
			text += fmt.Sprintf("\n[more: call again with offset=%d]", ch.Offset+int64(ch.Length))
		}
	}
	return structured(text, ch), nil
}

// fitChunk returns the longest prefix of data whose JSON encoding (as
// text when it is UTF-8) takes at most budget bytes, cut on a rune
// boundary. Binary data is returned as is: base64 always fits.
func fitChunk(data []byte, budget int) []byte {
	if !utf8.Valid(data) || encodedSize(string(data)) <= budget {
		return data
	}
	lo, hi := 0, len(data)
	for lo < hi {
		mid := lo + (hi-lo+1)/2
		if encodedSize(string(data[:mid])) <= budget {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	for lo > 0 && !utf8.Valid(data[:lo]) {
		lo--
	}
	return data[:lo]
}

// listFilesArgs are list_workspace_files' arguments; an empty Path lists
// the whole workspace.
type listFilesArgs struct {
	Path string `json:"path"`
}

// fileEntry is one entry of list_workspace_files.
type fileEntry struct {
	Path    string    `json:"path"`
	Type    string    `json:"type"`
	Size    int64     `json:"size"`
	ModTime time.Time `json:"mod_time"`
}

// fileList is list_workspace_files' structured content.
type fileList struct {
	Path    string      `json:"path"`
	Entries []fileEntry `json:"entries"`
	// Total counts the entries found; Entries lists the first ones.
	Total int `json:"total"`
	// Truncated: the walk stopped (at the listing cap, or at a shape
	// limit of the workspace), so Total is a lower bound; Reason says why.
	Truncated bool   `json:"truncated"`
	Reason    string `json:"reason,omitempty"`
}

// listFiles serves list_workspace_files.
func (s *Server) listFiles(ctx context.Context, c *call, a *listFilesArgs) (*mcp.CallToolResult, error) {
	rel := a.Path
	if rel == "" {
		rel = "."
	}
	entries, err := c.tenant.ws.List(ctx, rel)
	// Past wsfs's cap, or at a shape limit (a tree too deep or too big,
	// which a jail can make), the listing is partial, not failed: say so
	// and show what there is.
	var le *walk.LimitError
	reason := ""
	switch {
	case errors.Is(err, wsfs.ErrTooManyEntries):
		reason = "too many to list all; list a subdirectory"
	case errors.As(err, &le):
		reason = "the listing stopped because the " + le.Error()
	case err != nil:
		return nil, wsError(rel, err)
	}
	// Paths can be long and listings long: the first entries are listed
	// and the rest counted (see bound.go).
	n := shownCount(entries, int(s.limits.AnswerBytes/8), func(e wsfs.ListEntry) int { return min(len(e.Path), maxNameBytes) + 64 })
	out := fileList{Path: rel, Entries: make([]fileEntry, 0, n), Total: len(entries), Truncated: reason != "", Reason: reason}
	var b strings.Builder
	fmt.Fprintf(&b, "%s entries under %s", formatCount(int64(len(entries))), rel)
	if reason != "" {
		b.WriteString(" (" + reason + ")")
	}
	for _, e := range entries[:n] {
		p := clip(e.Path, maxNameBytes)
		out.Entries = append(out.Entries, fileEntry{Path: p, Type: e.Type, Size: e.Size, ModTime: e.ModTime.UTC()})
		fmt.Fprintf(&b, "\n%-4s %10s  %s  %s", e.Type, policy.FormatBytes(e.Size), e.ModTime.UTC().Format(time.RFC3339), p)
	}
	if n < len(entries) {
		fmt.Fprintf(&b, "\n…%s (list a subdirectory to see them)", moreText(len(entries)-n))
	}
	return structured(b.String(), out), nil
}

// snapMeta is how the snapshot tools show a snapshot.
type snapMeta struct {
	ID          string `json:"id"`
	CreatedAt   string `json:"created_at"`
	Description string `json:"description"`
	Files       int    `json:"files"`
	Bytes       int64  `json:"bytes"`
	// Skipped names entries a snapshot cannot hold (symlinks, devices, …);
	// a restore deletes them.
	Skipped      []string `json:"skipped,omitempty"`
	SkippedTotal int      `json:"skipped_total,omitempty"`
}

// toSnapMeta converts the store's Meta; times are RFC 3339 in UTC, the
// ISO-8601 timestamp of SPEC §6.
func toSnapMeta(m snapshot.Meta) snapMeta {
	sm := snapMeta{
		ID: m.ID, CreatedAt: m.CreatedAt.UTC().Format(time.RFC3339Nano), Description: clip(m.Description, maxMessageBytes),
		Files: m.Files, Bytes: m.Bytes, SkippedTotal: m.SkippedTotal,
	}
	sm.Skipped, _ = summarizePaths(m.Skipped, 1<<16)
	sm.SkippedTotal = max(sm.SkippedTotal, len(m.Skipped))
	return sm
}

// String is the one-line form used in the tools' text.
func (m snapMeta) String() string {
	s := fmt.Sprintf("%s  %s  %d files, %s", m.ID, m.CreatedAt, m.Files, policy.FormatBytes(m.Bytes))
	if m.Description != "" {
		s += fmt.Sprintf("  %q", m.Description)
	}
	if m.SkippedTotal > 0 {
		s += fmt.Sprintf("  (%d entries skipped: %s%s)", m.SkippedTotal, strings.Join(m.Skipped, ", "), moreText(m.SkippedTotal-len(m.Skipped)))
	}
	return s
}

// snapError turns a snapshot error into a refusal when the caller can fix
// it, and a host error otherwise.
func snapError(c *call, id string, err error) error {
	switch {
	case errors.Is(err, snapshot.ErrNotFound):
		return refuse("no snapshot with id %q; list_state_snapshots shows the existing ids", id)
	case errors.Is(err, snapshot.ErrInvalidID):
		return refuse("%q is not a snapshot id; ids are the UUIDs that create_state_snapshot returns", id)
	case errors.Is(err, snapshot.ErrTampered):
		return refuse("snapshot %q was rejected because it is damaged or was tampered with: %v; the workspace was not changed", id, err)
	case errors.Is(err, snapshot.ErrTooLarge), errors.Is(err, snapshot.ErrChanged):
		return refuse("%v", err)
	}
	var le *walk.LimitError
	switch {
	case errors.As(err, &le) && le.Would:
		return refuse("snapshot %q would take the workspace past its limits: %v; the workspace was not changed", id, le)
	case errors.As(err, &le):
		return limitRefusal(le, "compare a smaller workspace, or restore the snapshot to replace this one")
	}
	return fmt.Errorf("%s %q: %w", strings.TrimSuffix(c.tool(), "_state_snapshot"), id, err)
}

// createSnapshotArgs are create_state_snapshot's arguments.
type createSnapshotArgs struct {
	Description string `json:"description,omitempty"`
}

// createSnapshot serves create_state_snapshot.
func (s *Server) createSnapshot(ctx context.Context, c *call, a *createSnapshotArgs) (*mcp.CallToolResult, error) {
	t, st := c.tenant, c.tenant.snaps
	if msg := s.overSnapshotBytes(ctx, t, st); msg != "" {
		return nil, &refusal{msg: msg}
	}
	m, err := st.Create(ctx, a.Description)
	var le *walk.LimitError
	switch {
	case errors.Is(err, snapshot.ErrTooMany):
		if t.quota.Snapshots > 0 {
			s.quotaRefused(t, "snapshots")
			return nil, refuse("tenant %q keeps at most %d snapshots (its quota): %v; delete old ones with delete_state_snapshot",
				t.name, t.quota.Snapshots, err)
		}
		return nil, refuse("%v; delete old ones with delete_state_snapshot", err)
	case errors.Is(err, snapshot.ErrTooLarge), errors.Is(err, snapshot.ErrChanged):
		return nil, refuse("%v", err)
	case errors.As(err, &le):
		return nil, limitRefusal(le, "no snapshot was stored; remove files with run_sandbox_code first")
	case err != nil:
		return nil, fmt.Errorf("creating snapshot: %w", err)
	}
	sm := toSnapMeta(m)
	return structured("created snapshot "+sm.String(), sm), nil
}

// snapshotList is list_state_snapshots' structured content, newest first.
type snapshotList struct {
	Snapshots []snapMeta `json:"snapshots"`
	Total     int        `json:"total"`
}

// listSnapshots serves list_state_snapshots.
func (s *Server) listSnapshots(_ context.Context, c *call, _ *noArgs) (*mcp.CallToolResult, error) {
	metas, err := c.tenant.snaps.List()
	if err != nil {
		return nil, fmt.Errorf("listing snapshots: %w", err)
	}
	n := shownCount(metas, int(s.limits.AnswerBytes/8), func(m snapshot.Meta) int { return 160 + min(len(m.Description), maxMessageBytes) })
	out := snapshotList{Snapshots: make([]snapMeta, 0, n), Total: len(metas)}
	var b strings.Builder
	fmt.Fprintf(&b, "%d snapshot(s), newest first", len(metas))
	for _, m := range metas[:n] {
		sm := toSnapMeta(m)
		out.Snapshots = append(out.Snapshots, sm)
		b.WriteString("\n" + sm.String())
	}
	if n < len(metas) {
		b.WriteString("\n…" + moreText(len(metas)-n))
	}
	return structured(b.String(), out), nil
}

// snapshotIDArgs are the arguments of restore, delete and diff. The id is
// checked by the store, which rejects anything but a canonical UUID before
// it is used in a path.
type snapshotIDArgs struct {
	SnapshotID string `json:"snapshot_id"`
}

// restoreReport is restore_state_snapshot's structured content; unchanged
// files are counted, not listed, since that list is usually the long one.
type restoreReport struct {
	Snapshot     snapMeta `json:"snapshot"`
	Written      []string `json:"written"`
	WrittenTotal int      `json:"written_total"`
	Deleted      []string `json:"deleted"`
	DeletedTotal int      `json:"deleted_total"`
	Unchanged    int      `json:"unchanged"`
	// Note says why Deleted is incomplete: the workspace replaced was
	// beyond its limits.
	Note string `json:"note,omitempty"`
	// SessionsEnded counts the caller's run_sandbox_code sessions the
	// restore ended (reason restored): they had the old tree attached.
	SessionsEnded int `json:"sessions_ended"`
}

// restoreSnapshot serves restore_state_snapshot. The store makes the
// restore all-or-nothing; the exclusive lock the pipeline holds makes it
// atomic for the server's own runs and writes too.
func (s *Server) restoreSnapshot(ctx context.Context, c *call, a *snapshotIDArgs) (*mcp.CallToolResult, error) {
	r, err := c.tenant.snaps.Restore(ctx, a.SnapshotID)
	// This replica's sessions are ended below; the new directory is the
	// one other replicas compare with (checkRestoredElsewhere).
	c.tenant.noteWorkspace()
	if err != nil {
		return nil, snapError(c, a.SnapshotID, err)
	}
	budget := int(s.limits.AnswerBytes / 8)
	out := restoreReport{Snapshot: toSnapMeta(r.Meta), Unchanged: len(r.Unchanged), Note: r.Note}
	// Still under the lock, so that no session call runs against the
	// restored tree first: its sessions end, they do not see the new tree
	// (sessions.go says why).
	out.SessionsEnded = s.endRestoredSessions(ctx)
	out.Written, out.WrittenTotal = summarizePaths(r.Written, budget)
	out.Deleted, out.DeletedTotal = summarizePaths(r.Deleted, budget)
	text := fmt.Sprintf("restored snapshot %s: %d file(s) written, %d deleted, %d unchanged",
		out.Snapshot.ID, out.WrittenTotal, out.DeletedTotal, out.Unchanged)
	text += listLine("written", out.Written, out.WrittenTotal) + listLine("deleted", out.Deleted, out.DeletedTotal)
	if out.Note != "" {
		text += "\nnote: " + out.Note
	}
	if out.SessionsEnded > 0 {
		text += fmt.Sprintf("\n%d run_sandbox_code session(s) ended (reason restored): their variables are gone; their next calls start new sessions that see the restored files", out.SessionsEnded)
	}
	return structured(text, out), nil
}

// deleteSnapshot serves delete_state_snapshot. It leaves the workspace
// alone, but holds the workspace lock exclusively all the same (tools.go
// says why).
func (s *Server) deleteSnapshot(_ context.Context, c *call, a *snapshotIDArgs) (*mcp.CallToolResult, error) {
	if err := c.tenant.snaps.Delete(a.SnapshotID); err != nil {
		return nil, snapError(c, a.SnapshotID, err)
	}
	return structured("deleted snapshot "+a.SnapshotID, map[string]any{"deleted": a.SnapshotID}), nil
}

// diffReport is diff_state_snapshot's structured content.
type diffReport struct {
	ID            string   `json:"snapshot_id"`
	Added         []string `json:"added"`
	AddedTotal    int      `json:"added_total"`
	Removed       []string `json:"removed"`
	RemovedTotal  int      `json:"removed_total"`
	Modified      []string `json:"modified"`
	ModifiedTotal int      `json:"modified_total"`
	Unchanged     int      `json:"unchanged"`
}

// diffSnapshot serves diff_state_snapshot.
func (s *Server) diffSnapshot(ctx context.Context, c *call, a *snapshotIDArgs) (*mcp.CallToolResult, error) {
	d, err := c.tenant.snaps.Diff(ctx, a.SnapshotID)
	if err != nil {
		return nil, snapError(c, a.SnapshotID, err)
	}
	budget := int(s.limits.AnswerBytes / 8)
	out := diffReport{ID: a.SnapshotID, Unchanged: d.Unchanged}
	out.Added, out.AddedTotal = summarizePaths(d.Added, budget)
	out.Removed, out.RemovedTotal = summarizePaths(d.Removed, budget)
	out.Modified, out.ModifiedTotal = summarizePaths(d.Modified, budget)
	text := fmt.Sprintf("workspace vs snapshot %s: %d added, %d removed, %d modified, %d unchanged",
		a.SnapshotID, out.AddedTotal, out.RemovedTotal, out.ModifiedTotal, out.Unchanged)
	text += listLine("added", out.Added, out.AddedTotal) + listLine("removed", out.Removed, out.RemovedTotal) +
		listLine("modified", out.Modified, out.ModifiedTotal)
	return structured(text, out), nil
}

// summarizePaths returns the first paths of a listing, clipped, within
// budget bytes, and how many there are. The list is [], never null, in
// JSON: clients iterate it without a null check.
func summarizePaths(paths []string, budget int) ([]string, int) {
	n := shownCount(paths, budget, func(p string) int { return min(len(p), maxNameBytes) + 4 })
	out := make([]string, 0, n)
	for _, p := range paths[:n] {
		out = append(out, clip(p, maxNameBytes))
	}
	return out, len(paths)
}

// listLine renders one labelled list of paths for a tool's text.
func listLine(label string, shown []string, total int) string {
	if len(shown) == 0 {
		return ""
	}
	return "\n" + label + ": " + strings.Join(shown, ", ") + moreText(total-len(shown))
}

// workspaceQuotaRefused reports a write refused at the tenant's workspace
// quota (files or bytes), rather than at the server's own shape limit.
func (s *Server) workspaceQuotaRefused(t *tenant, le *walk.LimitError) {
	switch {
	case errors.Is(le.Err, walk.ErrTooManyFiles) && t.quota.WorkspaceFiles > 0 && le.Limit == int64(t.quota.WorkspaceFiles):
		s.quotaRefused(t, "workspace_files")
	case errors.Is(le.Err, walk.ErrTooLarge) && t.quota.WorkspaceBytes > 0 && le.Limit == t.quota.WorkspaceBytes:
		s.quotaRefused(t, "workspace_bytes")
	}
}

// overSnapshotBytes says, in plain words, whether a new snapshot of t's
// workspace would take its snapshots past its snapshot_bytes quota: the
// snapshots stored plus the workspace as it is now.
func (s *Server) overSnapshotBytes(ctx context.Context, t *tenant, st *snapshot.Store) string {
	q := t.quota.SnapshotBytes
	if q <= 0 {
		return ""
	}
	metas, err := st.List()
	if err != nil {
		return ""
	}
	var stored int64
	for _, m := range metas {
		stored += m.Bytes
	}
	use, err := walk.Check(ctx, t.workspace, s.tenantShape(t))
	if err != nil {
		return "" // the snapshot's own walk reports a workspace over its limits
	}
	if stored+use.Bytes <= q {
		return ""
	}
	s.quotaRefused(t, "snapshot_bytes")
	return fmt.Sprintf("tenant %q's snapshots hold %s and the workspace %s; together they would pass its snapshot_bytes quota of %s: delete old snapshots with delete_state_snapshot",
		t.name, policy.FormatBytes(stored), policy.FormatBytes(use.Bytes), policy.FormatBytes(q))
}
