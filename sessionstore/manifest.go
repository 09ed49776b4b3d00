package sessionstore

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/pyjail/pyjail/record"
)

// File names in a session directory.
const (
	manifestName = "manifest.json"
	blobPrefix   = "checkpoint-"
	tempPrefix   = ".tmp-"
)

// format is the manifest's format version; Load refuses any other.
const format = 1

// maxManifestBytes bounds a manifest, written or read. Its bulk is the
// lists of saved and skipped names, which a session with many thousands of
// globals could grow past this; Save then refuses the checkpoint rather
// than write a manifest Load would refuse.
const maxManifestBytes = 1 << 20

// manifest is manifest.json: the record.Checkpoint fields but the blob,
// and what the store needs to find the blob and trust it.
type manifest struct {
	Format int `json:"format"`
	// Pyjail is the version of the pyjail that wrote it, for people.
	Pyjail string `json:"pyjail"`
	Key    string `json:"key"`
	// SHA256 (hex) and Bytes describe the blob, whose file name is
	// derived from SHA256.
	SHA256 string `json:"sha256"`
	Bytes  int64  `json:"bytes"`
	record.Checkpoint
}

// blobName is the file the manifest's blob is stored in.
func (m *manifest) blobName() string { return blobPrefix + m.SHA256 }

func (m *manifest) info(t target) record.CheckpointInfo {
	return record.CheckpointInfo{
		Key: t.key, Profile: t.profile, Bytes: m.Bytes,
		Created: m.Created, Calls: m.Calls, SessionCreated: m.SessionCreated,
	}
}

// corrupt is the error of a checkpoint that fails its manifest.
func corrupt(t target, format string, args ...any) error {
	return fmt.Errorf("checkpoint %q of profile %s is corrupt: %s: %w",
		t.key, t.profile, fmt.Sprintf(format, args...), record.ErrCorruptCheckpoint)
}

// readManifest reads and checks t's manifest. A missing one is
// record.ErrNoCheckpoint; one that cannot be believed is
// record.ErrCorruptCheckpoint.
func readManifest(root *os.Root, t target) (*manifest, error) {
	name := filepath.Join(t.rel(), manifestName)
	f, err := root.Open(name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("checkpoint %q of profile %s: %w", t.key, t.profile, record.ErrNoCheckpoint)
	}
	if err != nil {
		return nil, corrupt(t, "its manifest cannot be opened (%v)", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxManifestBytes+1))
	switch {
	case err != nil:
		return nil, corrupt(t, "its manifest cannot be read (%v)", err)
	case len(data) > maxManifestBytes:
		return nil, corrupt(t, "its manifest is larger than %s", formatBytes(maxManifestBytes))
	}
	var m manifest
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, corrupt(t, "its manifest is not valid JSON (%v)", err)
	}
	if err := m.check(t); err != nil {
		return nil, corrupt(t, "%s", err)
	}
	return &m, nil
}

// check says what in m cannot be right for t.
func (m *manifest) check(t target) error {
	if m.Format != format {
		return fmt.Errorf("its manifest has format %d, and this pyjail reads format %d only", m.Format, format)
	}
	if sum, err := hex.DecodeString(m.SHA256); err != nil || len(sum) != 32 || hex.EncodeToString(sum) != m.SHA256 {
		return fmt.Errorf("its manifest's sha256 %q is not 64 lower-case hex digits", m.SHA256)
	}
	if m.Bytes < 0 {
		return fmt.Errorf("its manifest records a size of %d bytes", m.Bytes)
	}
	if m.Profile != t.profile {
		return fmt.Errorf("its manifest is of profile %q", m.Profile)
	}
	return nil
}
