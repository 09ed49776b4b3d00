package sessionstore

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/pyjail/pyjail/record"
)

// Bounds of a key's parts. A name is one directory name component; an
// owner is only ever handed to Locate, but it is bounded all the same,
// since it ends up in errors and logs.
const (
	maxName  = 64
	maxOwner = 128
)

// Rules of a key's parts, as said in errors.
const (
	nameRule  = "a session name is 1 to 64 ASCII letters, digits, '_', '-' and '.', starting with a letter or digit"
	ownerRule = "an owner is 1 to 128 ASCII letters, digits, '_', '-', '.', ':' and '@', starting with a letter or digit"
)

// target is a checked (profile, key) and the directory of its owner.
type target struct {
	profile record.Profile
	key     string
	owner   string
	name    string
	// dir is what Locate gave for owner: absolute and clean.
	dir string
}

// rel is the session directory, relative to dir.
func (t target) rel() string { return filepath.Join(string(t.profile), t.name) }

// lockPath is the key's lock file of the given kind ("hold", "write"):
// beside the session directory, with a leading dot no name can have.
func (t target) lockPath(kind string) string {
	return filepath.Join(t.dir, string(t.profile), "."+t.name+"."+kind)
}

// checkProfile accepts the profiles of record.Profiles, each of which is
// a plain directory name.
func checkProfile(p record.Profile) error {
	if !p.Valid() {
		return fmt.Errorf("%w %q: the profiles are %q", ErrInvalidProfile, p, record.Profiles())
	}
	return nil
}

// splitKey splits "<owner>/<name>" and checks both parts.
func splitKey(key string) (owner, name string, err error) {
	owner, name, ok := strings.Cut(key, "/")
	if !ok {
		return "", "", fmt.Errorf("%w %q: a key is \"<owner>/<name>\"", ErrInvalidKey, key)
	}
	if msg := checkPart(owner, maxOwner, "_-.:@"); msg != "" {
		return "", "", fmt.Errorf("%w %q: the owner %s; %s", ErrInvalidKey, key, msg, ownerRule)
	}
	if msg := checkPart(name, maxName, "_-."); msg != "" {
		return "", "", fmt.Errorf("%w %q: the name %s; %s", ErrInvalidKey, key, msg, nameRule)
	}
	return owner, name, nil
}

// validName reports whether a directory entry can be a session's, for
// listings that must skip lock and temporary files.
func validName(name string) bool { return checkPart(name, maxName, "_-.") == "" }

// checkPart says what is wrong with s, or returns "" when it is 1 to max
// bytes of ASCII letters, digits and the bytes of extra, starting with a
// letter or digit. That leaves out '/', NUL, "." and "..", and anything a
// filesystem or a terminal might read differently.
func checkPart(s string, max int, extra string) string {
	switch {
	case s == "":
		return "is empty"
	case len(s) > max:
		return fmt.Sprintf("is %d bytes long, more than %d", len(s), max)
	case !isAlnum(s[0]):
		return fmt.Sprintf("starts with %q", s[0])
	}
	for i := 1; i < len(s); i++ {
		if c := s[i]; !isAlnum(c) && strings.IndexByte(extra, c) < 0 {
			return fmt.Sprintf("has %q at byte %d", c, i)
		}
	}
	return ""
}

func isAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}
