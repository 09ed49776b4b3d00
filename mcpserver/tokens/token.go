package tokens

import (
	"crypto/rand"
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
)

// TokenPrefix starts every token NewToken makes, so that a leaked token is
// recognizable (secret scanners, log reviews) and a token pasted where a
// digest belongs is caught.
const TokenPrefix = "pyjail_"

// tokenBytes is the entropy of a token: 256 bits, far beyond guessing, and
// the size of the digest that stands for it.
const tokenBytes = 32

// NewToken returns a fresh random token: TokenPrefix and 32 bytes from
// crypto/rand in unpadded base64url (all characters RFC 6750 allows in a
// bearer token).
func NewToken() string {
	b := make([]byte, tokenBytes)
	// crypto/rand.Read never returns an error; it crashes the program if
	// the kernel's generator fails, which is what a token needs.
	_, _ = rand.Read(b)
	return TokenPrefix + base64.RawURLEncoding.EncodeToString(b)
}

// BearerToken extracts the token from an Authorization header value
// ("Bearer <token>", the scheme case-insensitive, RFC 6750 §2.1). It
// reports false for another scheme, an empty token or one with white
// space in it.
func BearerToken(header string) (string, bool) {
	scheme, token, ok := strings.Cut(header, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimLeft(token, " ")
	if token == "" || strings.ContainsAny(token, " \t\r\n") {
		return "", false
	}
	return token, true
}

// DefaultPath is the tokens file `pyjail token` and `pyjail serve --http`
// use without --tokens: /etc/pyjail/tokens.json for root, else
// $XDG_CONFIG_HOME/pyjail/tokens.json (~/.config/pyjail/tokens.json).
func DefaultPath() string {
	if os.Geteuid() == 0 {
		return "/etc/pyjail/tokens.json"
	}
	if d := os.Getenv("XDG_CONFIG_HOME"); filepath.IsAbs(d) {
		return filepath.Join(d, "pyjail", "tokens.json")
	}
	home, err := os.UserHomeDir()
	if err != nil {
		// No $HOME: the system path, which then fails with a clear
		// permission error rather than a file in the working directory.
		return "/etc/pyjail/tokens.json"
	}
	return filepath.Join(home, ".config", "pyjail", "tokens.json")
}
