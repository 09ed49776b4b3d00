package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pyjail/pyjail/mcpserver/tokens"
)

// pyjail runs the CLI in-process and returns its exit status and output.
func pyjail(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := run(args, strings.NewReader(""), &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

// TestTokenRoundTrip walks a tenant's life through the CLI and a Store
// reading the same file: add, list, authenticate, rotate (the old token
// stops working), remove.
func TestTokenRoundTrip(t *testing.T) {
	for name, file := range map[string]string{"json": "tokens.json", "lines": "tokens"} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), file)
			code, out, errOut := pyjail(t, "token", "add", "--tokens", path, "--quota", "runs_per_minute=30", "alice")
			if code != 0 {
				t.Fatalf("token add: exit %d: %s", code, errOut)
			}
			alice := strings.TrimSuffix(out, "\n")
			if strings.Contains(alice, "\n") || !strings.HasPrefix(alice, tokens.TokenPrefix) {
				t.Fatalf("stdout %q, want the token alone", out)
			}
			if !strings.Contains(errOut, "will not be shown again") {
				t.Errorf("stderr %q does not say the token is shown once", errOut)
			}
			// Flags after the name work too.
			if code, _, errOut := pyjail(t, "token", "add", "bob", "--operator", "--tokens", path); code != 0 {
				t.Fatalf("token add bob: exit %d: %s", code, errOut)
			}

			code, out, errOut = pyjail(t, "token", "list", "--tokens", path)
			if code != 0 {
				t.Fatalf("token list: exit %d: %s", code, errOut)
			}
			digest := tokens.Hash(alice)
			for _, want := range []string{"alice", "no", digest.Short() + "…", "runs_per_minute=30", "bob", "yes", "defaults"} {
				if !strings.Contains(out, want) {
					t.Errorf("list output lacks %q:\n%s", want, out)
				}
			}
			if strings.Contains(out, digest.String()) || strings.Contains(out, alice) {
				t.Errorf("list output shows a full digest or a token:\n%s", out)
			}

			store, err := tokens.Open(tokens.Config{Path: path})
			if err != nil {
				t.Fatal(err)
			}
			if tn, ok := store.Authenticate(alice); !ok || tn.Name != "alice" || tn.Quota.RunsPerMinute != 30 {
				t.Fatalf("Authenticate(alice's token) = %+v, %v", tn, ok)
			}

			if code, _, errOut := pyjail(t, "token", "add", "--tokens", path, "alice"); code == 0 || !strings.Contains(errOut, "--rotate") {
				t.Errorf("adding alice again: exit %d, %q; want a refusal that mentions --rotate", code, errOut)
			}
			code, out, errOut = pyjail(t, "token", "add", "--tokens", path, "--rotate", "alice")
			if code != 0 {
				t.Fatalf("token add --rotate: exit %d: %s", code, errOut)
			}
			rotated := strings.TrimSpace(out)
			if err := store.Reload(); err != nil {
				t.Fatal(err)
			}
			if _, ok := store.Authenticate(alice); ok {
				t.Error("the old token still works after rotation")
			}
			if tn, ok := store.Authenticate(rotated); !ok || tn.Quota.RunsPerMinute != 30 {
				t.Errorf("rotated token: %+v, %v; want alice with her quota", tn, ok)
			}

			if code, _, errOut := pyjail(t, "token", "remove", "--tokens", path, "alice"); code != 0 {
				t.Fatalf("token remove: exit %d: %s", code, errOut)
			}
			if err := store.Reload(); err != nil {
				t.Fatal(err)
			}
			if _, ok := store.Authenticate(rotated); ok {
				t.Error("a removed tenant's token still works")
			}
			if code, _, _ := pyjail(t, "token", "remove", "--tokens", path, "alice"); code == 0 {
				t.Error("removing a missing tenant succeeded")
			}
			if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
				t.Errorf("tokens file %v, %v; want mode 0600", fi.Mode(), err)
			}
		})
	}
}

func TestTokenUsage(t *testing.T) {
	for name, tc := range map[string]struct {
		args []string
		code int
		want string
	}{
		"no subcommand":    {args: []string{"token"}, code: exitUsage, want: "Usage:"},
		"unknown":          {args: []string{"token", "mint"}, code: exitUsage, want: `unknown subcommand "mint"`},
		"add without name": {args: []string{"token", "add"}, code: exitUsage, want: "want 1 tenant name"},
		"two names":        {args: []string{"token", "remove", "a", "b"}, code: exitUsage, want: "want 1 tenant name"},
		"list with name":   {args: []string{"token", "list", "a"}, code: exitUsage, want: "want 0 tenant name"},
		"bad name":         {args: []string{"token", "add", "--tokens", "/nonexistent/x", "A"}, code: exitNotOK, want: "invalid tenant name"},
		"bad flag":         {args: []string{"token", "list", "--rotate"}, code: exitUsage, want: "flag provided but not defined"},
	} {
		t.Run(name, func(t *testing.T) {
			code, _, errOut := pyjail(t, tc.args...)
			if code != tc.code || !strings.Contains(errOut, tc.want) {
				t.Errorf("exit %d, stderr %q; want %d and %q", code, errOut, tc.code, tc.want)
			}
		})
	}
}

// TestTokenAddEgressHosts: --egress-hosts narrows a tenant to hosts inside
// every egress profile's rules of --config; a host outside them, or any
// host when no profile has egress, is refused and the file is unchanged.
func TestTokenAddEgressHosts(t *testing.T) {
	dir := t.TempDir()
	config := filepath.Join(dir, "config.json")
	if err := os.WriteFile(config, []byte(`{"profiles": {"calc": {"python": "calc", "egress": {"rules": [{"host": "*.example.org"}, {"host": "api.example.com"}]}}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	for name, file := range map[string]string{"json": "tokens.json", "lines": "tokens"} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), file)
			if code, _, errOut := pyjail(t, "token", "add", "--tokens", path, "--config", config, "--egress-hosts", "data.example.org,*.eu.example.org", "alice"); code != 0 {
				t.Fatalf("token add: exit %d: %s", code, errOut)
			}
			if code, _, errOut := pyjail(t, "token", "add", "--tokens", path, "--config", config, "--egress-hosts", "", "bob"); code != 0 {
				t.Fatalf("token add bob with no host: exit %d: %s", code, errOut)
			}
			before, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			for _, tc := range []struct {
				args []string
				want string
			}{
				{[]string{"--config", config, "--egress-hosts", "evil.example"}, "never widen"},
				{[]string{"--config", config, "--egress-hosts", "data.example.org,example.org"}, "never widen"},
				{[]string{"--config", config, "--egress-hosts", "*.org"}, "egress"},
				{[]string{"--config", config, "--egress-hosts", "10.0.0.1"}, "egress"},
				{[]string{"--egress-hosts", "data.example.org"}, "no profile in the built-in defaults has egress"},
			} {
				args := append([]string{"token", "add", "--tokens", path}, tc.args...)
				code, _, errOut := pyjail(t, append(args, "carol")...)
				if code == 0 || !strings.Contains(errOut, tc.want) {
					t.Errorf("%v: exit %d, stderr %q; want a refusal saying %q", tc.args, code, errOut, tc.want)
				}
			}
			after, _ := os.ReadFile(path)
			if !bytes.Equal(before, after) {
				t.Errorf("refused adds changed the file:\n%s", after)
			}
			f, err := tokens.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			alice, _ := f.Lookup("alice")
			bob, _ := f.Lookup("bob")
			if got := alice.Tenant.Egress.List(); strings.Join(got, ",") != "data.example.org,*.eu.example.org" {
				t.Errorf("alice's egress_hosts = %q", got)
			}
			if got := bob.Tenant.Egress.List(); got == nil || len(got) != 0 {
				t.Errorf("bob's egress_hosts = %#v, want an empty list (no host)", got)
			}
			// Rotating without the flag keeps the narrowing.
			if code, _, errOut := pyjail(t, "token", "add", "--tokens", path, "--rotate", "alice"); code != 0 {
				t.Fatalf("rotate: exit %d: %s", code, errOut)
			}
			f, _ = tokens.ReadFile(path)
			if alice, _ = f.Lookup("alice"); len(alice.Tenant.Egress.List()) != 2 {
				t.Errorf("rotate dropped alice's narrowing: %+v", alice.Tenant.Egress)
			}
			_, out, _ := pyjail(t, "token", "list", "--tokens", path)
			if !strings.Contains(out, "only data.example.org,*.eu.example.org") || !strings.Contains(out, "no host") {
				t.Errorf("token list does not show the narrowing:\n%s", out)
			}
		})
	}
}
