package tokens

import (
	"fmt"
	"os"
	"strings"
)

// ReadFile reads and parses a tokens file.
func ReadFile(path string) (*File, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading tokens file: %w", err)
	}
	f, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("parsing %q: %w", path, err)
	}
	return f, nil
}

// AddOptions are the choices of `pyjail token add`.
type AddOptions struct {
	// Rotate replaces the token of an existing tenant, keeping its
	// operator flag and quotas unless Operator or Quota say otherwise.
	// Without it, Add refuses a tenant the file already has.
	Rotate bool
	// Operator, when set, sets the tenant's operator flag.
	Operator *bool
	// Quota holds KEY=VALUE overrides in the line format's syntax
	// ("runs_per_minute=30", "workspace_bytes=1GiB"); each sets one key
	// and leaves the others as they were.
	Quota []string
	// EgressHosts, when set, replaces the tenant's egress narrowing
	// (Tenant.Egress): the host patterns its runs may reach, a subset of
	// its profiles' egress rules (an empty list: no host at all). The
	// caller checks the subset against the server's config; Add checks
	// only that each is a host pattern.
	EgressHosts *[]string
}

// Add gives a tenant a new token: it stores the token's sha256 in the file
// at path (created, mode 0600, if missing) and returns the token, which
// exists nowhere else. Without opt.Rotate a tenant already in the file is
// refused (ErrTenantExists); with it, a tenant not in the file is refused
// (ErrNoTenant), so a typo cannot create a second tenant.
func Add(path, name string, opt AddOptions) (string, error) {
	if err := checkName(name); err != nil {
		return "", err
	}
	var token string
	err := update(path, func(f *File) error {
		e, exists := f.Lookup(name)
		switch {
		case exists && !opt.Rotate:
			return fmt.Errorf("%w: %q", ErrTenantExists, name)
		case !exists && opt.Rotate:
			return fmt.Errorf("%w: %q", ErrNoTenant, name)
		}
		e.Tenant.Name = name
		if opt.Operator != nil {
			e.Tenant.Operator = *opt.Operator
		}
		for _, kv := range opt.Quota {
			key, value, ok := strings.Cut(kv, "=")
			if !ok {
				return fmt.Errorf("quota %q: want KEY=VALUE", kv)
			}
			if err := e.Tenant.Quota.SetQuota(key, value); err != nil {
				return err
			}
		}
		if opt.EgressHosts != nil {
			if err := checkEgressHosts(*opt.EgressHosts); err != nil {
				return err
			}
			e.Tenant.Egress = NewNarrowing(append([]string{}, *opt.EgressHosts...))
		}
		token = NewToken()
		e.SHA256 = Hash(token)
		f.Put(e)
		return nil
	})
	if err != nil {
		return "", err
	}
	return token, nil
}

// Remove deletes a tenant's entry from the file at path; its token stops
// working when a Store reloads the file. A tenant not in the file is
// ErrNoTenant.
func Remove(path, name string) error {
	return update(path, func(f *File) error {
		if !f.Delete(name) {
			return fmt.Errorf("%w: %q", ErrNoTenant, name)
		}
		return nil
	})
}

// newFile is the contents of a tokens file that does not exist yet.
func newFile(path string) *File {
	f := &File{Format: formatFor(path)}
	if f.Format == FormatLines {
		for _, l := range strings.Split(strings.TrimSuffix(lineHeader, "\n"), "\n") {
			f.lines = append(f.lines, rawLine{text: l})
		}
	}
	return f
}
