package packages

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/pyjail/pyjail/policy"
	"github.com/pyjail/pyjail/record"
)

// Runner runs one execution in a jail. The server's runner satisfies it;
// tests give one that runs pip on the host.
type Runner interface {
	Run(ctx context.Context, req record.Request) (*record.Result, error)
}

// Quota is one tenant's package quotas; a zero field means no limit.
type Quota struct {
	Bytes int64
	Count int
}

// Installer installs requirements into tenants' layers. It is safe for
// concurrent use: installs of one tenant are serialised by its layer's
// lock (in this process and across replicas), those of different tenants
// run side by side.
type Installer struct {
	// Runner runs pip in the install profile.
	Runner Runner
	// Cache is the shared wheel cache.
	Cache *Cache
	// Config is the operator's packages section.
	Config policy.Packages
	// Profile is the profile pip runs in; "" means policy.ProfilePackages.
	Profile record.Profile
	// Rootfs maps the rootfs's distributions (normalized names) to their
	// versions: a requirement the rootfs already holds installs nothing,
	// and a layer may not hold another version of one (it would be
	// shadowed: the layer comes after the rootfs on sys.path).
	Rootfs map[string]string
	// Logger receives one record per install; nil discards.
	Logger *slog.Logger

	mu    sync.Mutex
	locks map[string]*sync.Mutex
}

// Report is what an install did.
type Report struct {
	// Installed are the distributions it added or replaced.
	Installed []Dist `json:"installed"`
	// Satisfied names requirements that were already met (by the rootfs
	// or the layer) and installed nothing.
	Satisfied []string `json:"already_satisfied,omitempty"`
	// Layer is every distribution of the layer afterwards.
	Layer []Dist `json:"layer"`
	// Bytes and Count are the layer's usage afterwards.
	Bytes int64 `json:"bytes"`
	Count int   `json:"count"`
	// FromCache and Downloaded count the wheels taken from the shared
	// cache and fetched from the index.
	FromCache  int   `json:"from_cache"`
	Downloaded int   `json:"downloaded"`
	WallMS     int64 `json:"wall_ms"`
}

// Files the install writes into the staging directory, which is the
// install jail's workspace (and working directory).
const (
	stageSite     = "site"
	stageWheels   = "wheels"
	stageReqs     = "requirements.txt"
	stagePinned   = "pinned.txt"
	stageReport   = "report.json"
	maxReportSize = 4 << 20
)

// pipReport is the part of pip's installation report (--report, format
// version 1) the host reads.
type pipReport struct {
	Version string `json:"version"`
	Install []struct {
		DownloadInfo struct {
			URL         string `json:"url"`
			ArchiveInfo struct {
				Hash   string            `json:"hash"`
				Hashes map[string]string `json:"hashes"`
			} `json:"archive_info"`
		} `json:"download_info"`
		Requested bool `json:"requested"`
		Metadata  struct {
			Name    string `json:"name"`
			Version string `json:"version"`
		} `json:"metadata"`
	} `json:"install"`
}

// item is one distribution an install resolves to.
type item struct {
	name, key, version string
	file               string // the wheel's file name
	sha256             string // from the index, "" when it gives none
}

var (
	wheelFile  = regexp.MustCompile(`^[A-Za-z0-9_.+!-]+\.whl$`)
	versionStr = regexp.MustCompile(`^[A-Za-z0-9.+!_-]+$`)
)

func (in *Installer) profile() record.Profile {
	if in.Profile != "" {
		return in.Profile
	}
	return policy.ProfilePackages
}

func (in *Installer) log() *slog.Logger {
	if in.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return in.Logger
}

// lock serialises installs and removals of one layer in this process and,
// through an flock on the layer's lock file, across processes.
func (in *Installer) lock(ctx context.Context, l Layer) (func(), error) {
	in.mu.Lock()
	if in.locks == nil {
		in.locks = map[string]*sync.Mutex{}
	}
	m := in.locks[l.Dir]
	if m == nil {
		m = &sync.Mutex{}
		in.locks[l.Dir] = m
	}
	in.mu.Unlock()
	m.Lock()
	if err := os.MkdirAll(l.Dir, 0o755); err != nil {
		m.Unlock()
		return nil, fmt.Errorf("creating the package directory: %w", err)
	}
	f, err := os.OpenFile(filepath.Join(l.Dir, lockFile), os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		m.Unlock()
		return nil, fmt.Errorf("opening the package lock: %w", err)
	}
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			break
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			m.Unlock()
			return nil, fmt.Errorf("locking the package layer: %w", err)
		}
		select {
		case <-ctx.Done():
			f.Close()
			m.Unlock()
			return nil, fmt.Errorf("waiting for another install of this tenant: %w", ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
	return func() { f.Close(); m.Unlock() }, nil
}

// Install installs reqs into the layer l within quota q. Errors wrapping
// the package's sentinels are the caller's to read (a sentence naming the
// package); others are host failures.
func (in *Installer) Install(ctx context.Context, l Layer, reqs []Requirement, q Quota) (rep Report, err error) {
	start := time.Now()
	if in.Config.IndexURL == "" {
		return rep, ErrNoIndex
	}
	unlock, err := in.lock(ctx, l)
	if err != nil {
		return rep, err
	}
	defer unlock()
	stage, err := l.stage()
	if err != nil {
		return rep, err
	}
	defer os.RemoveAll(stage)
	site := filepath.Join(stage, stageSite)
	if cur, err := l.Site(); err != nil {
		return rep, err
	} else if cur != "" {
		if err := copyTree(cur, site); err != nil {
			return rep, fmt.Errorf("staging the package layer: %w", err)
		}
	} else if err := os.Mkdir(site, 0o755); err != nil {
		return rep, fmt.Errorf("staging the package layer: %w", err)
	}
	if err := os.Mkdir(filepath.Join(stage, stageWheels), 0o755); err != nil {
		return rep, fmt.Errorf("staging the package layer: %w", err)
	}
	var lines []string
	for _, r := range reqs {
		lines = append(lines, r.String())
	}
	if err := writeNew(filepath.Join(stage, stageReqs), strings.Join(lines, "\n")+"\n"); err != nil {
		return rep, err
	}

	// Resolve: what would pip install, given the rootfs?
	if err := in.runPip(ctx, stage, in.resolveScript()); err != nil {
		return rep, err
	}
	items, err := readReport(filepath.Join(stage, stageReport))
	if err != nil {
		return rep, err
	}
	// What the layer holds already at the version resolved stays: pip
	// resolved against the rootfs only (the install jail's Python runs
	// isolated, without the layer on its path).
	items, err = l.withoutHeld(items)
	if err != nil {
		return rep, err
	}
	got := map[string]bool{}
	for _, it := range items {
		got[it.key] = true
		if v, ok := in.Rootfs[it.key]; ok {
			return rep, fmt.Errorf("%w: %s %s would replace the rootfs's %s %s, which the layer cannot do (the rootfs comes first on sys.path); pin a version that needs %s %s, or ask the operator",
				ErrInstall, it.name, it.version, it.name, v, it.name, v)
		}
		if it.sha256 == "" && !strings.HasSuffix(it.file, ".whl") {
			return rep, fmt.Errorf("%w: %s", ErrBuildRefused, it.name)
		}
	}
	for _, r := range reqs {
		if !got[r.Key] {
			rep.Satisfied = append(rep.Satisfied, r.String())
		}
	}
	if len(items) == 0 {
		rep.Layer, err = l.List()
		u, _ := l.usage()
		rep.Bytes, rep.Count, rep.WallMS = u.Bytes, u.Dists, time.Since(start).Milliseconds()
		return rep, err
	}

	// Fetch: cached wheels are checked and copied in; pip downloads the
	// rest, checks hashes, and installs all of them into the staged layer.
	hashed := true
	var pinned []string
	keys := map[string]bool{}
	for _, it := range items {
		keys[it.key] = true
		line := it.name + "==" + it.version
		if it.sha256 == "" {
			hashed = false
		} else {
			line += " --hash=sha256:" + it.sha256
			ok, err := in.Cache.Fetch(it.sha256, filepath.Join(stage, stageWheels, it.file))
			if err != nil && !errors.Is(err, ErrHash) {
				return rep, err
			}
			if ok {
				rep.FromCache++
			}
		}
		pinned = append(pinned, line)
	}
	if err := writeNew(filepath.Join(stage, stagePinned), strings.Join(pinned, "\n")+"\n"); err != nil {
		return rep, err
	}
	// A distribution the install replaces leaves no files of its old
	// version behind.
	if _, err := removeDists(site, keys); err != nil {
		return rep, err
	}
	if err := in.runPip(ctx, stage, in.fetchScript(hashed)); err != nil {
		return rep, err
	}
	// pip checked the index's hashes inside the jail; the host checks
	// them again on what it keeps, since it trusts nothing the jail wrote.
	for _, it := range items {
		p := filepath.Join(stage, stageWheels, it.file)
		sum, err := fileSHA256(p)
		if err != nil {
			return rep, fmt.Errorf("%w: %s: the wheel %s is missing after the download: %v", ErrInstall, it.name, it.file, err)
		}
		if it.sha256 != "" && sum != it.sha256 {
			return rep, fmt.Errorf("%w: %s: the wheel %s has sha256 %s, the index says %s; nothing was installed", ErrHash, it.name, it.file, sum[:12], it.sha256[:12])
		}
		if it.sha256 != "" && !in.Cache.Has(sum) {
			if _, err := in.Cache.Put(p); err != nil {
				return rep, err
			}
			rep.Downloaded++
		} else if it.sha256 == "" {
			rep.Downloaded++
		}
	}
	if err := harden(site); err != nil {
		return rep, err
	}
	u, err := usage(site)
	if err != nil {
		return rep, err
	}
	if q.Bytes > 0 && u.Bytes > q.Bytes {
		return rep, fmt.Errorf("%w: the layer would hold %s, above this tenant's packages_bytes quota of %s; nothing was installed (remove_packages frees room)",
			ErrQuota, mib(u.Bytes), mib(q.Bytes))
	}
	if q.Count > 0 && u.Dists > q.Count {
		return rep, fmt.Errorf("%w: the layer would hold %d distributions, above this tenant's packages quota of %d; nothing was installed (remove_packages frees room)",
			ErrQuota, u.Dists, q.Count)
	}
	if err := l.swap(site); err != nil {
		return rep, err
	}
	layer, err := l.List()
	if err != nil {
		return rep, err
	}
	for _, d := range layer {
		if keys[NormalizeName(d.Name)] {
			rep.Installed = append(rep.Installed, d)
		}
	}
	rep.Layer, rep.Bytes, rep.Count = layer, u.Bytes, u.Dists
	rep.WallMS = time.Since(start).Milliseconds()
	in.log().Info("packages installed", "layer", l.Dir, "count", len(rep.Installed),
		"from_cache", rep.FromCache, "downloaded", rep.Downloaded, "duration_ms", rep.WallMS)
	return rep, nil
}

// Remove removes the named distributions from l. A name the layer does
// not hold is an ErrNotInstalled naming it, and nothing is removed.
func (in *Installer) Remove(ctx context.Context, l Layer, names []string) ([]Dist, error) {
	keys := map[string]bool{}
	for _, n := range names {
		r, err := ParseRequirement(n)
		if err != nil {
			return nil, err
		}
		if r.Specifier != "" || len(r.Extras) > 0 {
			return nil, fmt.Errorf("%w %q: name a distribution, without a version or extras", ErrRequirement, n)
		}
		keys[r.Key] = true
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("%w: name at least one package", ErrRequirement)
	}
	unlock, err := in.lock(ctx, l)
	if err != nil {
		return nil, err
	}
	defer unlock()
	have, err := l.List()
	if err != nil {
		return nil, err
	}
	held := map[string]bool{}
	for _, d := range have {
		held[NormalizeName(d.Name)] = true
	}
	for _, n := range names {
		if k := NormalizeName(strings.TrimSpace(n)); !held[k] {
			return nil, fmt.Errorf("%w: %s is not in this tenant's package layer (list_packages shows what is)", ErrNotInstalled, k)
		}
	}
	cur, err := l.Site()
	if err != nil {
		return nil, err
	}
	stage, err := l.stage()
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(stage)
	site := filepath.Join(stage, stageSite)
	if err := copyTree(cur, site); err != nil {
		return nil, fmt.Errorf("staging the package layer: %w", err)
	}
	removed, err := removeDists(site, keys)
	if err != nil {
		return nil, err
	}
	if err := harden(site); err != nil {
		return nil, err
	}
	left, err := listDists(site)
	if err != nil {
		return nil, err
	}
	if len(left) == 0 {
		err = l.swap("")
	} else {
		err = l.swap(site)
	}
	return removed, err
}

// usage measures the current layer.
func (l Layer) usage() (Usage, error) {
	site, err := l.Site()
	if err != nil || site == "" {
		return Usage{}, err
	}
	return usage(site)
}

// runPip runs script in the install jail with the staging directory as
// its workspace, and turns a failed run into the error pip's output
// names.
func (in *Installer) runPip(ctx context.Context, stage, script string) error {
	res, err := in.Runner.Run(ctx, record.Request{
		Profile: in.profile(), Code: script, Workspace: stage,
		Timeout: in.Config.Effective().Timeout.D(),
	})
	if err != nil {
		return fmt.Errorf("running pip: %w", err)
	}
	if res.Verdict == record.VerdictOK {
		return nil
	}
	return pipError(res)
}

var (
	reMarker    = regexp.MustCompile(`(?m)^PJPKG (\S+) (\S+)$`)
	reNoVersion = regexp.MustCompile(`satisfies the requirement ([A-Za-z0-9._-]+)`)
	reHashLine  = regexp.MustCompile(`(?m)^\s+([A-Za-z0-9._-]+)(?:==\S+)? from \S+`)
)

// pipError reads a failed pip run's output.
func pipError(res *record.Result) error {
	out := res.Stdout + "\n" + res.Stderr
	for _, m := range reMarker.FindAllStringSubmatch(out, -1) {
		switch m[1] {
		case "sdist-only":
			return fmt.Errorf("%w: %s is published on the index only as a source distribution, whose build would run its own code; this server installs wheels only (the operator may allow builds with packages.allow_builds)",
				ErrBuildRefused, m[2])
		case "nopip":
			return fmt.Errorf("%w: this server's rootfs has no pip wheel (/usr/share/python-wheels, Debian's python3-pip-whl), so it cannot install; the operator builds the rootfs with the default recipe", ErrInstall)
		case "missing":
			return fmt.Errorf("%w: the index has no distribution named %s that installs here (check the name and version); pip said: %s", ErrInstall, m[2], lastLines(res.Stderr, 4))
		}
	}
	if strings.Contains(out, "DO NOT MATCH THE HASHES") {
		name := "a package"
		if m := reHashLine.FindStringSubmatch(out[strings.Index(out, "DO NOT MATCH THE HASHES"):]); m != nil {
			name = m[1]
		}
		return fmt.Errorf("%w: %s: the file the index served does not match the sha256 the index gives for it; nothing was installed", ErrHash, name)
	}
	if m := reNoVersion.FindStringSubmatch(out); m != nil {
		return fmt.Errorf("%w: no version of %s on the index fits the requirement and this Python", ErrInstall, m[1])
	}
	if res.Verdict != record.VerdictError {
		return fmt.Errorf("%w: pip ended with verdict %s: %s", ErrInstall, res.Verdict, res.Message)
	}
	return fmt.Errorf("%w: pip said: %s", ErrInstall, lastLines(res.Stderr, 6))
}

// lastLines returns the last n non-empty lines of s, at most 1 KiB.
func lastLines(s string, n int) string {
	var ls []string
	for _, l := range strings.Split(s, "\n") {
		if strings.TrimSpace(l) != "" {
			ls = append(ls, strings.TrimSpace(l))
		}
	}
	if len(ls) > n {
		ls = ls[len(ls)-n:]
	}
	out := strings.Join(ls, " | ")
	if len(out) > 1024 {
		out = "…" + out[len(out)-1024:]
	}
	return out
}

// readReport reads the resolve step's report (written by the jail:
// opened without following a symlink, bounded) into items.
func readReport(p string) ([]item, error) {
	f, err := openRegular(p)
	if err != nil {
		return nil, fmt.Errorf("%w: pip wrote no report: %v", ErrInstall, err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxReportSize+1))
	if err != nil {
		return nil, fmt.Errorf("reading pip's report: %w", err)
	}
	if len(b) > maxReportSize {
		return nil, fmt.Errorf("%w: pip's report is larger than %d MiB", ErrInstall, maxReportSize>>20)
	}
	var r pipReport
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("%w: reading pip's report: %v", ErrInstall, err)
	}
	var items []item
	seen := map[string]bool{}
	for _, e := range r.Install {
		it := item{name: e.Metadata.Name, key: NormalizeName(e.Metadata.Name), version: e.Metadata.Version}
		if !reqName.MatchString(it.name) || !versionStr.MatchString(it.version) || seen[it.key] {
			return nil, fmt.Errorf("%w: pip's report names %q %q, not a distribution and version", ErrInstall, it.name, it.version)
		}
		seen[it.key] = true
		u, err := url.Parse(e.DownloadInfo.URL)
		if err != nil {
			return nil, fmt.Errorf("%w: pip's report has a bad URL for %s", ErrInstall, it.name)
		}
		file, err := url.PathUnescape(path.Base(u.Path))
		if err != nil {
			return nil, fmt.Errorf("%w: pip's report has a bad URL for %s", ErrInstall, it.name)
		}
		if !wheelFile.MatchString(file) {
			// Only an sdist (allowed builds) or something stranger.
			return nil, fmt.Errorf("%w: %s resolves to %q, not a wheel; this server installs wheels only", ErrBuildRefused, it.name, file)
		}
		it.file = file
		sum := e.DownloadInfo.ArchiveInfo.Hashes["sha256"]
		if sum == "" {
			if h, ok := strings.CutPrefix(e.DownloadInfo.ArchiveInfo.Hash, "sha256="); ok {
				sum = h
			}
		}
		if sum != "" && !sha256Hex.MatchString(sum) {
			return nil, fmt.Errorf("%w: the index gives %s a sha256 that is not one", ErrHash, it.name)
		}
		it.sha256 = sum
		items = append(items, it)
	}
	return items, nil
}

// fileSHA256 hashes the regular file p, never following a symlink.
func fileSHA256(p string) (string, error) {
	f, err := openRegular(p)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, io.LimitReader(f, MaxWheelBytes+1)); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// writeNew writes a new file (never through a symlink).
func writeNew(p, content string) error {
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o644)
	if err != nil {
		return fmt.Errorf("staging %q: %w", filepath.Base(p), err)
	}
	_, err = f.WriteString(content)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }

// withoutHeld drops the items the current layer holds at the same
// version.
func (l Layer) withoutHeld(items []item) ([]item, error) {
	have, err := l.List()
	if err != nil {
		return nil, err
	}
	held := map[string]string{}
	for _, d := range have {
		held[NormalizeName(d.Name)] = d.Version
	}
	out := items[:0]
	for _, it := range items {
		if v, ok := held[it.key]; ok && v == it.version {
			continue
		}
		out = append(out, it)
	}
	return out, nil
}
