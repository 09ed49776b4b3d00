package main

import (
	"path/filepath"
	"strings"
	"testing"
)

func TestLockLayer(t *testing.T) {
	dir := t.TempDir()
	l := lockLayer(dir)
	if l.Required {
		t.Error("data_dir_locks is required; one replica needs no locks")
	}
	if !l.Active && !strings.Contains(l.Detail, "unsupported") {
		t.Errorf("locks on %s: inactive for another reason than a filesystem without locks: %s", dir, l.Detail)
	}
	if got, _ := filepath.Glob(filepath.Join(dir, "*")); len(got) != 0 {
		t.Errorf("the probe left %q behind", got)
	}
	if l := lockLayer(filepath.Join(dir, "missing")); l.Active || !strings.Contains(l.Detail, "not checked") {
		t.Errorf("missing data dir: %+v, want inactive and not checked", l)
	}
}
