package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"strings"

	"github.com/pyjail/pyjail/policy"
	"github.com/pyjail/pyjail/record"
	"github.com/pyjail/pyjail/workspace/walk"
)

// Workspace quotas that bind code (issue 21, finding 2). The write tool
// and snapshots check workspace_bytes and workspace_files before they
// write; code in a jail writes through the kernel, where no portable
// per-directory quota exists (project quotas need an XFS or ext4 mount
// option the host rarely has). So a run of a tenant with a workspace
// quota is measured: the bind step lists the workspace before the code
// runs, and settleWorkspace walks it again once the run ended. A run that
// left the workspace over the quota loses what it created, which it never
// had room for, and answers verdict quota_exceeded with a sentence naming
// the quota, what was removed and what is left. Files that existed before
// the run are never touched, even when they grew: the answer says so, and
// the tenant frees space with its next run (which may delete files) or by
// restoring a snapshot; writes and snapshots stay refused until then.
// During a run the workspace can still grow up to the server's own shape
// limits and the jail's file size limit; it never stays there.
//
// The mode is reported in sandbox://status as workspace_quota_mode.
const workspaceQuotaMode = "measured after each run; files a run created past the quota are removed, verdict quota_exceeded"

// wsBefore is what the bind step saw of the workspace before a run.
type wsBefore struct {
	paths map[string]struct{}
	use   walk.Usage
}

// hasWorkspaceQuota reports whether t's workspace is bound by a quota of
// its own, narrower than the server's shape.
func (s *Server) hasWorkspaceQuota(t *tenant) bool {
	return t != nil && t.ws != nil && (t.quota.WorkspaceBytes > 0 || t.quota.WorkspaceFiles > 0)
}

// serverShape is the workspace shape of the server, before any quota.
func (s *Server) serverShape() walk.Limits {
	sh := s.cfg.WorkspaceLimits.Shape
	if sh == (walk.Limits{}) {
		p := s.cfg.Policy.WorkspaceShape
		sh = walk.Limits{MaxDepth: p.MaxDepth, MaxFiles: p.MaxFiles, MaxBytes: p.MaxBytes}
	}
	return sh.WithDefaults()
}

// bindWorkspace is step 9b, under the workspace lock: before a workspace
// run of a tenant with a workspace quota, the paths the workspace holds,
// so that settleWorkspace knows what the run created.
func (s *Server) bindWorkspace(ctx context.Context, c *call) error {
	if c.spec.profile != record.ProfileWorkspace || !s.hasWorkspaceQuota(c.tenant) {
		return nil
	}
	b := &wsBefore{paths: map[string]struct{}{}}
	err := walk.Dir(ctx, c.tenant.workspace, s.serverShape(), func(e *walk.Entry) error {
		b.paths[e.Path] = struct{}{}
		b.use.Files++
		if e.Info.Mode().IsRegular() {
			b.use.Bytes += e.Info.Size()
		}
		return nil
	})
	var le *walk.LimitError
	if err != nil && !errors.As(err, &le) {
		return fmt.Errorf("measuring the workspace before the run: %w", err)
	}
	c.run.before = b
	return nil
}

// settleWorkspace is the other half of the bind step, run by the run's
// logic once the Runner answered: it measures the workspace, and when the
// run took it past the tenant's quota removes what the run created and
// turns res into verdict quota_exceeded. It reports what it did to the
// trace and the observer.
func (s *Server) settleWorkspace(ctx context.Context, c *call, res *record.Result) error {
	b, t := c.run.before, c.tenant
	if b == nil || res == nil {
		return nil
	}
	quota := s.tenantShape(t)
	// Repeat while the server's shape stops the walk: every pass removes
	// what it found, so the next one sees further.
	var removedFiles, removedBytes int64
	var after, first walk.Usage
	for i := range 4 {
		use, fresh, freshFiles, freshBytes, err := s.measureNew(ctx, t.workspace, b)
		if err != nil {
			return fmt.Errorf("measuring the workspace after the run: %w", err)
		}
		after = use
		if i == 0 {
			first = use
		}
		if use.CheckAdd(quota, 0, 0) == nil || len(fresh) == 0 {
			break
		}
		if err := removeNew(t.workspace, fresh); err != nil {
			return fmt.Errorf("removing what the run wrote past the quota: %w", err)
		}
		removedFiles += freshFiles
		removedBytes += freshBytes
	}
	if removedFiles == 0 && after.CheckAdd(quota, 0, 0) == nil {
		return nil
	}
	which, limit, got := "workspace_bytes", policy.FormatBytes(quota.MaxBytes), policy.FormatBytes(first.Bytes)
	if first.Bytes <= quota.MaxBytes {
		which, limit, got = "workspace_files", fmt.Sprintf("%d files and directories", quota.MaxFiles), fmt.Sprintf("%d files and directories", first.Files)
	}
	var msg strings.Builder
	fmt.Fprintf(&msg, "the run took the workspace to %s, past tenant %q's quota of %s (%s)", got, t.name, limit, which)
	if removedFiles > 0 {
		fmt.Fprintf(&msg, "; the %d files and directories it created (%s) were removed again", removedFiles, policy.FormatBytes(removedBytes))
	}
	fmt.Fprintf(&msg, "; the workspace holds %s in %d entries now", policy.FormatBytes(after.Bytes), after.Files)
	if err := after.CheckAdd(quota, 0, 0); err != nil {
		msg.WriteString(", still over the quota through files that existed before the run and grew: delete or shrink files (a run may remove them) or restore a snapshot; file writes and snapshots are refused until then")
	}
	if res.Verdict != record.VerdictOK {
		fmt.Fprintf(&msg, " (the code itself ended with %s: %s)", res.Verdict, strings.TrimSpace(res.Message))
	}
	res.Verdict, res.Message = record.VerdictQuotaExceeded, msg.String()
	c.trace.Quota = true
	s.quotaRefused(t, which)
	return nil
}

// measureNew walks the workspace within the server's shape and returns its
// usage, the topmost entries that were not there before the run (a new
// directory stands for everything below it), and what they hold.
func (s *Server) measureNew(ctx context.Context, dir string, b *wsBefore) (use walk.Usage, fresh []string, files, bytes int64, err error) {
	err = walk.Dir(ctx, dir, s.serverShape(), func(e *walk.Entry) error {
		use.Files++
		size := int64(0)
		if e.Info.Mode().IsRegular() {
			size = e.Info.Size()
		}
		use.Bytes += size
		if _, old := b.paths[e.Path]; old {
			return nil
		}
		files++
		bytes += size
		if parent := path.Dir(e.Path); parent == "." || has(b.paths, parent) {
			fresh = append(fresh, e.Path)
		}
		return nil
	})
	var le *walk.LimitError
	if errors.As(err, &le) {
		err = nil
	}
	return use, fresh, files, bytes, err
}

func has(m map[string]struct{}, k string) bool {
	_, ok := m[k]
	return ok
}

// removeNew removes the entries rel (and what is below them) from the
// workspace dir, never following a link out of it (os.Root).
func removeNew(dir string, rel []string) error {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	var errs []error
	for _, p := range rel {
		if err := root.RemoveAll(p); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
