package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/pyjail/pyjail/packages"
)

// Tools of SPEC §13: the caller's own package layer.
const (
	toolInstallPackages = "install_packages"
	toolListPackages    = "list_packages"
	toolRemovePackages  = "remove_packages"
)

// packageArgs are the arguments of install_packages and remove_packages.
type packageArgs struct {
	Packages []string `json:"packages"`
}

// packageLayer returns the caller's layer and the installer, or the
// refusal that says why there is none.
func (s *Server) packageLayer(c *call) (packages.Layer, error) {
	switch {
	case s.cfg.Packages == nil || s.cfg.Packages.Config.IndexURL == "":
		return packages.Layer{}, &refusal{msg: "this server has no package index configured (packages.index_url), so it installs no packages; the rootfs's packages are listed in sandbox://environment"}
	case c.tenant == nil:
		return packages.Layer{}, c.tenantErr
	case c.tenant.pkgs.Dir == "":
		return packages.Layer{}, &refusal{msg: "this server keeps no package layer for this client (no data directory)"}
	}
	return c.tenant.pkgs, nil
}

// packageQuota is the caller's package quotas: its token's, else the
// server's defaults, else the packages section's.
func (s *Server) packageQuota(t *tenant) packages.Quota {
	d := s.cfg.Packages.Config.Effective()
	q := packages.Quota{Bytes: t.quota.PackagesBytes, Count: t.quota.Packages}
	if q.Bytes == 0 {
		q.Bytes = d.Bytes
	}
	if q.Count == 0 {
		q.Count = d.Count
	}
	return q
}

// packageRefusal turns the installer's sentences into tool errors; a
// quota refusal is counted as the tenant's.
func (s *Server) packageRefusal(c *call, err error) error {
	for _, e := range []error{packages.ErrRequirement, packages.ErrBuildRefused, packages.ErrHash, packages.ErrQuota,
		packages.ErrNotInstalled, packages.ErrInstall, packages.ErrNoIndex} {
		if errors.Is(err, e) {
			if errors.Is(err, packages.ErrQuota) && c.tenant != nil {
				c.trace.Quota = true
				quota := "packages"
				if strings.Contains(err.Error(), "packages_bytes") {
					quota = "packages_bytes"
				}
				s.quotaRefused(c.tenant, quota)
			}
			return &refusal{msg: err.Error(), cause: err}
		}
	}
	return err
}

func (s *Server) installPackages(ctx context.Context, c *call, a *packageArgs) (*mcp.CallToolResult, error) {
	l, err := s.packageLayer(c)
	if err != nil {
		return nil, err
	}
	if msg := s.refusal(); msg != "" {
		return nil, &refusal{msg: msg}
	}
	reqs, err := packages.ParseRequirements(a.Packages)
	if err != nil {
		return nil, s.packageRefusal(c, err)
	}
	// An install runs jails: it counts as a run of its tenant (runs per
	// minute) and holds one of the server's slots while it lasts.
	if msg := s.overRate(ctx, c.tenant); msg != "" {
		c.trace.Quota = true
		return nil, &refusal{msg: msg}
	}
	release, _, err := s.admit.acquireFor(ctx, c.tenantKey(), time.Now().Add(maxLockWait))
	if err != nil {
		return nil, &refusal{msg: "no jail slot became free for the install within " + formatWait(maxLockWait) + "; try again shortly", cause: err}
	}
	defer release()
	rep, err := s.cfg.Packages.Install(ctx, l, reqs, s.packageQuota(c.tenant))
	if err != nil {
		return nil, s.packageRefusal(c, err)
	}
	if rep.Installed == nil {
		rep.Installed = []packages.Dist{}
	}
	if rep.Layer == nil {
		rep.Layer = []packages.Dist{}
	}
	var b strings.Builder
	if len(rep.Installed) == 0 {
		b.WriteString("Nothing to install: already satisfied (" + strings.Join(rep.Satisfied, ", ") + ").\n")
	} else {
		b.WriteString("Installed:")
		for _, d := range rep.Installed {
			fmt.Fprintf(&b, " %s %s", d.Name, d.Version)
		}
		fmt.Fprintf(&b, " (%d from the shared cache, %d downloaded, %d ms).\n", rep.FromCache, rep.Downloaded, rep.WallMS)
	}
	fmt.Fprintf(&b, "Your package layer holds %d distribution(s), %s; later run_python and run_sandbox_code calls import them (after the rootfs's own packages).",
		rep.Count, mibText(rep.Bytes))
	return structured(b.String(), rep), nil
}

func (s *Server) listPackages(ctx context.Context, c *call, _ *noArgs) (*mcp.CallToolResult, error) {
	l, err := s.packageLayer(c)
	if err != nil {
		return nil, err
	}
	ds, err := l.List()
	if err != nil {
		return nil, err
	}
	q := s.packageQuota(c.tenant)
	out := struct {
		Packages   []packages.Dist `json:"packages"`
		Bytes      int64           `json:"bytes"`
		QuotaBytes int64           `json:"quota_bytes"`
		QuotaCount int             `json:"quota_count"`
	}{Packages: []packages.Dist{}, QuotaBytes: q.Bytes, QuotaCount: q.Count}
	var b strings.Builder
	for _, d := range ds {
		out.Packages = append(out.Packages, d)
		out.Bytes += d.Bytes
		fmt.Fprintf(&b, "%s %s (%s)\n", d.Name, d.Version, mibText(d.Bytes))
	}
	if len(ds) == 0 {
		b.WriteString("Your package layer is empty; install_packages adds to it.\n")
	}
	fmt.Fprintf(&b, "%d of %d distributions, %s of %s.", len(ds), q.Count, mibText(out.Bytes), mibText(q.Bytes))
	return structured(b.String(), out), nil
}

func (s *Server) removePackages(ctx context.Context, c *call, a *packageArgs) (*mcp.CallToolResult, error) {
	l, err := s.packageLayer(c)
	if err != nil {
		return nil, err
	}
	removed, err := s.cfg.Packages.Remove(ctx, l, a.Packages)
	if err != nil {
		return nil, s.packageRefusal(c, err)
	}
	var names []string
	for _, d := range removed {
		names = append(names, d.Name+" "+d.Version)
	}
	out := struct {
		Removed []packages.Dist `json:"removed"`
	}{Removed: removed}
	return structured("Removed: "+strings.Join(names, ", ")+".", out), nil
}

func mibText(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }
