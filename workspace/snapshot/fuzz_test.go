package snapshot

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"testing"
)

const fuzzID = "6f1c2a4e-1b2c-4d3e-8f40-123456789abc"

func hexSum(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

// fileJSON renders one entry the way Create does.
func fileJSON(path, content string) string {
	return fmt.Sprintf(`{"path":%q,"size":%d,"mtime":"2021-03-04T05:06:07Z","mode":420,"sha256":%q,"encoding":"utf-8","content":%q}`,
		path, len(content), hexSum(content), content)
}

func docText(files, bytes int, dirs, entries string) string {
	return fmt.Sprintf(`{"format":%q,"id":%q,"created_at":"2021-03-04T05:06:07Z","description":"d","files":%d,"bytes":%d,"dirs":[%s],"entries":[%s]}`,
		formatV1, fuzzID, files, bytes, dirs, entries)
}

// decodeSeeds are the static corpus: each with whether it must decode.
var decodeSeeds = []struct {
	name string
	doc  string
	ok   bool
}{
	{"valid", docText(2, 5, `{"path":"d","mode":493}`, fileJSON("d/a", "abc")+","+fileJSON("b", "xy")), true},
	{"valid empty", docText(0, 0, "", ""), true},
	{"valid base64", docText(1, 2, "", `{"path":"bin","size":2,"mtime":"2021-03-04T05:06:07Z","mode":420,"sha256":"`+hexSum("\x00\xff")+`","encoding":"base64","content":"AP8="}`), true},
	{"dotdot", docText(1, 1, "", fileJSON("../../etc/x", "a")), false},
	{"absolute", docText(1, 1, "", fileJSON("/etc/x", "a")), false},
	{"inner dotdot", docText(1, 1, "", fileJSON("a/../../x", "a")), false},
	{"dot", docText(1, 1, "", fileJSON(".", "a")), false},
	{"nul", docText(1, 1, "", fileJSON("a\x00b", "a")), false},
	{"dir escape", docText(0, 0, `{"path":"..","mode":493}`, ""), false},
	{"bad hash", strings.Replace(docText(1, 3, "", fileJSON("a", "abc")), `"content":"abc"`, `"content":"abd"`, 1), false},
	{"bad base64", docText(1, 2, "", `{"path":"bin","size":2,"mtime":"2021-03-04T05:06:07Z","mode":420,"sha256":"`+hexSum("\x00\xff")+`","encoding":"base64","content":"AP8"}`), false},
	{"unknown field", strings.Replace(docText(1, 1, "", fileJSON("a", "a")), `"mode":420`, `"mode":420,"uid":0`, 1), false},
	{"unknown member", strings.Replace(docText(0, 0, "", ""), `"description"`, `"evil":1,"description"`, 1), false},
	{"duplicate", docText(2, 2, "", fileJSON("a", "a")+","+fileJSON("a", "a")), false},
	{"file under file", docText(2, 2, "", fileJSON("a", "a")+","+fileJSON("a/b", "b")), false},
	{"dir after file", docText(1, 1, `{"path":"a/b","mode":493}`, fileJSON("a", "a")), false},
	{"count mismatch", docText(5, 1, "", fileJSON("a", "a")), false},
	{"wrong id", strings.Replace(docText(0, 0, "", ""), fuzzID, "00000000-0000-4000-8000-000000000000", 1), false},
	{"setuid", strings.Replace(docText(1, 1, "", fileJSON("a", "a")), `"mode":420`, `"mode":2541`, 1), false},
	{"truncated", docText(1, 1, "", fileJSON("a", "a"))[:60], false},
	{"trailing", docText(0, 0, "", "") + "{}", false},
	{"not an object", `[]`, false},
	{"empty", ``, false},
	{"too many files", docText(3, 3, "", fileJSON("a", "a")+","+fileJSON("b", "b")+","+fileJSON("c", "c")), false},
	{"reserved", docText(1, 1, "", fileJSON(inPlaceOld+"/x", "a")), false},
}

// checkDecode is the property shared by the fuzz target and its static
// twin: decoding never panics, fails only with ErrTampered or ErrTooLarge,
// and everything it hands out is a verified, confined path.
func checkDecode(t *testing.T, doc []byte) error {
	t.Helper()
	seen := map[string]bool{}
	_, err := decodeDoc(bytes.NewReader(doc), fuzzID, decodeLimits{maxFiles: 2, maxBytes: 1 << 20}, visitor{
		dir: func(d DirRecord) error {
			if why := validPath(d.Path); why != "" || reserved(d.Path) {
				t.Errorf("visited bad dir path %q", d.Path)
			}
			return nil
		},
		file: func(rec *FileRecord, data []byte) error {
			if why := validPath(rec.Path); why != "" || reserved(rec.Path) {
				t.Errorf("visited bad file path %q", rec.Path)
			}
			if seen[rec.Path] {
				t.Errorf("visited %q twice", rec.Path)
			}
			seen[rec.Path] = true
			if hexSum(string(data)) != rec.SHA256 || int64(len(data)) != rec.Size {
				t.Errorf("visited %q with unverified content", rec.Path)
			}
			if rec.Mode&^0o777 != 0 {
				t.Errorf("visited %q with mode %o", rec.Path, rec.Mode)
			}
			return nil
		},
	})
	if err != nil && !errors.Is(err, ErrTampered) && !errors.Is(err, ErrTooLarge) {
		t.Errorf("decodeDoc error %v is neither ErrTampered nor ErrTooLarge", err)
	}
	return err
}

func FuzzDecodeDoc(f *testing.F) {
	for _, s := range decodeSeeds {
		f.Add([]byte(s.doc))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		checkDecode(t, doc)
		// The header reader must agree not to panic either.
		readHeader(bytes.NewReader(doc), fuzzID)
	})
}

// TestDecodeDocCorpus is FuzzDecodeDoc's static twin: plain go test runs
// every seed and also checks its expected verdict.
func TestDecodeDocCorpus(t *testing.T) {
	for _, s := range decodeSeeds {
		t.Run(s.name, func(t *testing.T) {
			err := checkDecode(t, []byte(s.doc))
			if got, want := err == nil, s.ok; got != want {
				t.Errorf("decodeDoc ok = %v (err %v), want %v", got, err, want)
			}
		})
	}
}
