package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// rateLockWait bounds the wait for the shared run log's lock, which is
// held for one read and one small write.
const rateLockWait = 5 * time.Second

// allowShared is the runs_per_minute check of a tenant whose directory
// other replicas share: the start times of its last runs live in a file
// there (runsFile, one Unix time in nanoseconds a line, at most limit
// lines), read and rewritten under rateLock, so the quota holds for the
// tenant as a whole, not per replica. Replicas on different machines
// compare their own clocks with each other's entries: skew between them
// shifts the window by as much.
func (s *Server) allowShared(ctx context.Context, t *tenant, limit int, window time.Duration, now time.Time) (bool, time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, rateLockWait)
	defer cancel()
	unlock, err := t.rateLock.Lock(ctx)
	if err != nil {
		return false, 0, err
	}
	defer unlock()
	path := filepath.Join(t.root, runsFile)
	times, err := readRunLog(path, now.Add(-window))
	if err != nil {
		return false, 0, err
	}
	if len(times) >= limit {
		oldest := times[len(times)-limit]
		return false, time.Unix(0, oldest).Add(window).Sub(now), nil
	}
	times = append(times, now.UnixNano())
	if len(times) > limit {
		times = times[len(times)-limit:]
	}
	return true, 0, writeRunLog(path, times)
}

// readRunLog returns the times in the run log after since, sorted. A line
// that does not parse (a torn write) is dropped: the log only ever
// undercounts.
func readRunLog(path string, since time.Time) ([]int64, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading run log %q: %w", path, err)
	}
	var out []int64
	for _, line := range strings.Split(string(b), "\n") {
		v, err := strconv.ParseInt(line, 10, 64)
		if err == nil && v > since.UnixNano() {
			out = append(out, v)
		}
	}
	slices.Sort(out)
	return out, nil
}

// writeRunLog replaces the run log through a temporary file and a
// rename, so a reader never sees a torn file. It is not fsynced: after a
// power loss the quota forgets at most a minute of runs.
func writeRunLog(path string, times []int64) error {
	var b strings.Builder
	for _, v := range times {
		b.WriteString(strconv.FormatInt(v, 10) + "\n")
	}
	tmp := path + ".tmp"
	os.Remove(tmp) // left by a replica that died mid-write; we hold the lock
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("writing run log %q: %w", path, err)
	}
	_, err = f.WriteString(b.String())
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("writing run log %q: %w", path, err)
	}
	return nil
}
