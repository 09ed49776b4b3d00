package snapshot

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/pyjail/pyjail/workspace/walk"
)

// formatV1 tags the document layout so a future change is detectable.
const formatV1 = "pyjail-snapshot/1"

// Encodings of FileRecord.Content.
const (
	EncodingUTF8   = "utf-8"
	EncodingBase64 = "base64"
)

const (
	// maxDescription bounds the free-text description (bytes).
	maxDescription = 4096
	// maxSkippedNames bounds Meta.Skipped; SkippedTotal counts the rest.
	maxSkippedNames = 100
	// maxHeaderBytes bounds how much of a document List and Get read:
	// the header comes first and is small.
	maxHeaderBytes = 1 << 20
	// Kernel limits on names.
	maxPathLen = 4096
	maxNameLen = 255
)

// Meta describes one snapshot. It is the header of the stored document.
type Meta struct {
	// ID is a random (version 4) UUID in canonical lower-case form.
	ID string `json:"id"`
	// CreatedAt is in UTC; JSON renders it in RFC 3339 with nanoseconds.
	CreatedAt   time.Time `json:"created_at"`
	Description string    `json:"description"`
	// Files and Bytes count the regular files recorded and their total size.
	Files int   `json:"files"`
	Bytes int64 `json:"bytes"`
	// Skipped names up to 100 workspace entries that were not recorded
	// (symbolic links, FIFOs, sockets, devices, names that are not valid
	// UTF-8, quoted with %q); SkippedTotal counts all of them. Restore
	// deletes such entries, since they are not part of the snapshot.
	Skipped      []string `json:"skipped,omitempty"`
	SkippedTotal int      `json:"skipped_total,omitempty"`
}

// FileRecord is one regular file in a snapshot document.
type FileRecord struct {
	// Path is relative to the workspace, slash-separated and clean.
	Path    string    `json:"path"`
	Size    int64     `json:"size"`
	ModTime time.Time `json:"mtime"`
	// Mode holds the permission bits (0o777 at most; setuid, setgid and
	// sticky are never recorded or restored).
	Mode uint32 `json:"mode"`
	// SHA256 is the lower-case hex digest of the raw content.
	SHA256 string `json:"sha256"`
	// Encoding is EncodingUTF8 when the content is valid UTF-8 (stored as
	// is), else EncodingBase64 (standard alphabet, padded).
	Encoding string `json:"encoding"`
	Content  string `json:"content"`
}

// DirRecord is one directory in a snapshot document, so that empty
// directories and directory permissions survive a restore.
type DirRecord struct {
	Path string `json:"path"`
	Mode uint32 `json:"mode"`
}

// header is the document's leading object members, in the order written.
type header struct {
	Format string `json:"format"`
	Meta
}

// newID returns a random version 4 UUID.
func newID() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("generating snapshot id: %w", err)
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32], nil
}

// parseID validates a caller-supplied ID and returns its canonical form.
// Only canonical version 4 UUIDs are accepted; upper case is folded. The
// result is safe to use as a file name.
func parseID(id string) (string, error) {
	c := strings.ToLower(id)
	if len(c) != 36 {
		return "", fmt.Errorf("parsing snapshot id %q: %w", id, ErrInvalidID)
	}
	for i := 0; i < len(c); i++ {
		switch i {
		case 8, 13, 18, 23:
			if c[i] != '-' {
				return "", fmt.Errorf("parsing snapshot id %q: %w", id, ErrInvalidID)
			}
		default:
			if !strings.ContainsRune("0123456789abcdef", rune(c[i])) {
				return "", fmt.Errorf("parsing snapshot id %q: %w", id, ErrInvalidID)
			}
		}
	}
	if c[14] != '4' || !strings.ContainsRune("89ab", rune(c[19])) {
		return "", fmt.Errorf("parsing snapshot id %q: not a version 4 UUID: %w", id, ErrInvalidID)
	}
	return c, nil
}

// validPath reports why p is not an acceptable relative workspace path,
// or "" if it is: it must be valid UTF-8, relative, clean (so no "..",
// ".", empty or doubled components), not the root, free of NUL, and
// within the kernel's length limits.
func validPath(p string) string {
	switch {
	case p == "" || p == ".":
		return "names the workspace root"
	case !utf8.ValidString(p):
		return "is not valid UTF-8"
	case strings.IndexByte(p, 0) >= 0:
		return "contains a NUL byte"
	case strings.HasPrefix(p, "/"):
		return "is absolute"
	case len(p) > maxPathLen:
		return "is too long"
	case path.Clean(p) != p:
		return "is not clean"
	case p == ".." || strings.HasPrefix(p, "../"):
		return "climbs out of the workspace"
	}
	for _, part := range strings.Split(p, "/") {
		if len(part) > maxNameLen {
			return "has a name longer than 255 bytes"
		}
	}
	return ""
}

// encodeContent picks the encoding for raw file content.
func encodeContent(data []byte) (encoding, content string) {
	if utf8.Valid(data) {
		return EncodingUTF8, string(data)
	}
	return EncodingBase64, base64.StdEncoding.EncodeToString(data)
}

// tampered wraps ErrTampered with the snapshot ID and a reason.
func tampered(id, format string, args ...any) error {
	return fmt.Errorf("loading snapshot %q: %s: %w", id, fmt.Sprintf(format, args...), ErrTampered)
}

// checkFile validates one file record and returns its decoded content.
func checkFile(id string, rec *FileRecord) ([]byte, error) {
	if why := validPath(rec.Path); why != "" {
		return nil, tampered(id, "file path %q %s", rec.Path, why)
	}
	if reserved(rec.Path) {
		return nil, tampered(id, "file %q uses a reserved name", rec.Path)
	}
	if rec.Mode&^0o777 != 0 {
		return nil, tampered(id, "file %q has mode %#o beyond permission bits", rec.Path, rec.Mode)
	}
	var data []byte
	switch rec.Encoding {
	case EncodingUTF8:
		data = []byte(rec.Content)
	case EncodingBase64:
		var err error
		data, err = base64.StdEncoding.Strict().DecodeString(rec.Content)
		if err != nil {
			return nil, tampered(id, "file %q has bad base64: %v", rec.Path, err)
		}
	default:
		return nil, tampered(id, "file %q has unknown encoding %q", rec.Path, rec.Encoding)
	}
	if int64(len(data)) != rec.Size {
		return nil, tampered(id, "file %q holds %d bytes, header says %d", rec.Path, len(data), rec.Size)
	}
	sum := sha256.Sum256(data)
	if hex.EncodeToString(sum[:]) != rec.SHA256 {
		return nil, tampered(id, "file %q does not match its sha256", rec.Path)
	}
	return data, nil
}

// visitor receives the verified contents of a document as it streams by.
// Either callback may be nil. A callback's error stops decoding and is
// returned as is.
type visitor struct {
	dir  func(DirRecord) error
	file func(rec *FileRecord, content []byte) error
}

// limits for decoding; see Limits.
type decodeLimits struct {
	maxFiles int
	maxBytes int64
	shape    walk.Limits
}

// decodeDoc streams a snapshot document from r, validating as it goes,
// and hands every directory and file to v. wantID is the ID the file name
// promised; the document must agree. It returns ErrTampered (or
// ErrTooLarge) on any inconsistency, so a caller that stages what v
// receives must discard the staging on error: some checks (the header
// counts, the ID) can only complete at the end. Memory use is one file
// record at a time plus the set of paths.
func decodeDoc(r io.Reader, wantID string, lim decodeLimits, v visitor) (Meta, error) {
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	var h header
	paths := newPathSet()
	var files int
	var total int64
	haveID, haveTime, haveEntries := false, false, false

	if err := expectDelim(dec, '{'); err != nil {
		return Meta{}, tampered(wantID, "%v", err)
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return Meta{}, tampered(wantID, "%v", err)
		}
		key, _ := tok.(string)
		var derr error
		switch key {
		case "format":
			derr = dec.Decode(&h.Format)
		case "id":
			derr = dec.Decode(&h.ID)
			haveID = true
		case "created_at":
			derr = dec.Decode(&h.CreatedAt)
			haveTime = true
		case "description":
			derr = dec.Decode(&h.Description)
		case "files":
			derr = dec.Decode(&h.Files)
		case "bytes":
			derr = dec.Decode(&h.Bytes)
		case "skipped":
			derr = dec.Decode(&h.Skipped)
		case "skipped_total":
			derr = dec.Decode(&h.SkippedTotal)
		case "dirs":
			derr = decodeArray(dec, func() error {
				var d DirRecord
				if err := dec.Decode(&d); err != nil {
					return err
				}
				if why := validPath(d.Path); why != "" {
					return tampered(wantID, "directory path %q %s", d.Path, why)
				}
				if reserved(d.Path) {
					return tampered(wantID, "directory %q uses a reserved name", d.Path)
				}
				if d.Mode&^0o777 != 0 {
					return tampered(wantID, "directory %q has mode %#o beyond permission bits", d.Path, d.Mode)
				}
				if err := lim.shape.CheckPath(d.Path, true); err != nil {
					return fmt.Errorf("loading snapshot %q: %w", wantID, err)
				}
				if why := paths.add(d.Path, true); why != "" {
					return tampered(wantID, "directory %q %s", d.Path, why)
				}
				if err := (walk.Usage{}).CheckAdd(lim.shape, int64(paths.entries), total); err != nil {
					return fmt.Errorf("loading snapshot %q: %w", wantID, err)
				}
				if paths.len() > 2*lim.maxFiles {
					return fmt.Errorf("loading snapshot %q: more than %d entries: %w", wantID, 2*lim.maxFiles, ErrTooLarge)
				}
				if v.dir != nil {
					if err := v.dir(d); err != nil {
						return visitErr{err}
					}
				}
				return nil
			})
		case "entries":
			haveEntries = true
			derr = decodeArray(dec, func() error {
				var rec FileRecord
				if err := dec.Decode(&rec); err != nil {
					return err
				}
				data, err := checkFile(wantID, &rec)
				if err != nil {
					return err
				}
				if err := lim.shape.CheckPath(rec.Path, false); err != nil {
					return fmt.Errorf("loading snapshot %q: %w", wantID, err)
				}
				if why := paths.add(rec.Path, false); why != "" {
					return tampered(wantID, "file %q %s", rec.Path, why)
				}
				if err := (walk.Usage{}).CheckAdd(lim.shape, int64(paths.entries), total+rec.Size); err != nil {
					return fmt.Errorf("loading snapshot %q: %w", wantID, err)
				}
				files++
				total += rec.Size
				if files > lim.maxFiles {
					return fmt.Errorf("loading snapshot %q: more than %d files: %w", wantID, lim.maxFiles, ErrTooLarge)
				}
				if total > lim.maxBytes {
					return fmt.Errorf("loading snapshot %q: more than %d bytes: %w", wantID, lim.maxBytes, ErrTooLarge)
				}
				if v.file != nil {
					if err := v.file(&rec, data); err != nil {
						return visitErr{err}
					}
				}
				return nil
			})
		default:
			return Meta{}, tampered(wantID, "unknown member %q", key)
		}
		var ve visitErr
		switch {
		case derr == nil:
		case errors.As(derr, &ve):
			return Meta{}, ve.err
		case errors.Is(derr, ErrTampered), errors.Is(derr, ErrTooLarge), isLimit(derr):
			return Meta{}, derr
		default:
			return Meta{}, tampered(wantID, "member %q: %v", key, derr)
		}
	}
	if err := expectDelim(dec, '}'); err != nil {
		return Meta{}, tampered(wantID, "%v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return Meta{}, tampered(wantID, "trailing data after the document")
	}
	switch {
	case h.Format != formatV1:
		return Meta{}, tampered(wantID, "format %q, want %q", h.Format, formatV1)
	case !haveID || h.ID != wantID:
		return Meta{}, tampered(wantID, "document id %q does not match its file name", h.ID)
	case !haveTime:
		return Meta{}, tampered(wantID, "no created_at")
	case !haveEntries:
		return Meta{}, tampered(wantID, "no entries")
	case h.Files != files || h.Bytes != total:
		return Meta{}, tampered(wantID, "header counts %d files, %d bytes; entries hold %d, %d", h.Files, h.Bytes, files, total)
	}
	return h.Meta, nil
}

// visitErr carries a visitor's own error (an I/O failure while staging)
// through decodeArray, so it is not mistaken for a malformed document.
type visitErr struct{ err error }

func (e visitErr) Error() string { return e.err.Error() }

// pathSet detects duplicate paths and files that other entries need as
// directories, as records stream by, so a conflict is reported as
// tampering before staging trips over it.
type pathSet struct {
	kind    map[string]bool     // recorded path -> is a directory
	implied map[string]struct{} // every proper ancestor of a recorded path
	// entries counts the distinct paths, recorded or implied: the
	// entries a restore creates.
	entries int
}

func newPathSet() *pathSet {
	return &pathSet{kind: map[string]bool{}, implied: map[string]struct{}{}}
}

func (s *pathSet) len() int { return len(s.kind) }

// add records p and returns why it conflicts, or "".
func (s *pathSet) add(p string, isDir bool) string {
	if _, dup := s.kind[p]; dup {
		return "appears twice"
	}
	if _, ok := s.implied[p]; ok && !isDir {
		return "is a file but also the parent of another entry"
	}
	for d := path.Dir(p); d != "."; d = path.Dir(d) {
		if isDirRec, ok := s.kind[d]; ok && !isDirRec {
			return fmt.Sprintf("lies under the file %q", d)
		}
		if _, ok := s.implied[d]; ok {
			break // d's own ancestors were checked when it was first implied
		}
		s.implied[d] = struct{}{}
		if _, rec := s.kind[d]; !rec {
			s.entries++
		}
	}
	if _, ok := s.implied[p]; !ok {
		s.entries++
	}
	s.kind[p] = isDir
	return ""
}

// decodeArray reads '[', calls each per element until ']', then consumes
// ']'.
func decodeArray(dec *json.Decoder, each func() error) error {
	if err := expectDelim(dec, '['); err != nil {
		return err
	}
	for dec.More() {
		if err := each(); err != nil {
			return err
		}
	}
	return expectDelim(dec, ']')
}

func expectDelim(dec *json.Decoder, want json.Delim) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	if d, ok := tok.(json.Delim); !ok || d != want {
		return fmt.Errorf("got %v, want %q", tok, want)
	}
	return nil
}

// readHeader decodes only the leading members of a document, stopping
// at "dirs" or "entries", and reads at most maxHeaderBytes. It backs List
// and Get, which must not load whole snapshots. It does not verify
// content; Restore and Diff do.
func readHeader(r io.Reader, wantID string) (Meta, error) {
	dec := json.NewDecoder(io.LimitReader(r, maxHeaderBytes))
	var h header
	if err := expectDelim(dec, '{'); err != nil {
		return Meta{}, tampered(wantID, "%v", err)
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return Meta{}, tampered(wantID, "%v", err)
		}
		key, _ := tok.(string)
		var dst any
		switch key {
		case "format":
			dst = &h.Format
		case "id":
			dst = &h.ID
		case "created_at":
			dst = &h.CreatedAt
		case "description":
			dst = &h.Description
		case "files":
			dst = &h.Files
		case "bytes":
			dst = &h.Bytes
		case "skipped":
			dst = &h.Skipped
		case "skipped_total":
			dst = &h.SkippedTotal
		case "dirs", "entries":
			if h.Format != formatV1 || h.ID != wantID || h.CreatedAt.IsZero() {
				return Meta{}, tampered(wantID, "header incomplete or does not match its file name")
			}
			return h.Meta, nil
		default:
			return Meta{}, tampered(wantID, "unknown member %q", key)
		}
		if err := dec.Decode(dst); err != nil {
			return Meta{}, tampered(wantID, "member %q: %v", key, err)
		}
	}
	return Meta{}, tampered(wantID, "no entries")
}

// writeHeader writes the document's opening and header members; the
// caller then writes the "dirs" and "entries" arrays and the closing brace.
func writeHeader(w io.Writer, m Meta) error {
	b, err := json.Marshal(header{Format: formatV1, Meta: m})
	if err != nil {
		return err
	}
	// Reopen the object: drop the closing brace so arrays can follow.
	b = bytes.TrimSuffix(b, []byte("}"))
	_, err = w.Write(b)
	return err
}
