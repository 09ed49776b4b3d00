package packages

import (
	"fmt"
	"regexp"
	"strings"
)

// Requirement is one checked requirement string: a distribution name,
// optional extras and optional version specifiers, as pip reads them.
type Requirement struct {
	// Name is the name as given; Key is its PEP 503 normal form.
	Name, Key string
	Extras    []string
	// Specifier is the version clause, e.g. "==0.9.0" or ">=1,<2".
	Specifier string
}

// String renders the requirement the way pip is given it.
func (r Requirement) String() string {
	s := r.Name
	if len(r.Extras) > 0 {
		s += "[" + strings.Join(r.Extras, ",") + "]"
	}
	return s + r.Specifier
}

// MaxRequirements is how many requirement strings one call may name.
const MaxRequirements = 32

// maxRequirementLen bounds one requirement string.
const maxRequirementLen = 200

// The grammar accepted is the part of PEP 508 that names what to install
// from an index: no URL (name @ url), no environment markers, no pip
// options, no paths. Names and extras follow PEP 508's identifier rule;
// versions are PEP 440 characters with an optional ".*" or local part.
var (
	reqName    = regexp.MustCompile(`^[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?$`)
	reqClause  = regexp.MustCompile(`^(~=|===|==|!=|<=|>=|<|>)\s*([A-Za-z0-9][A-Za-z0-9.+!_-]*(?:\.\*)?)$`)
	normalizer = regexp.MustCompile(`[-_.]+`)
)

// NormalizeName returns the PEP 503 normal form of a distribution name.
func NormalizeName(name string) string {
	return strings.ToLower(normalizer.ReplaceAllString(name, "-"))
}

// ParseRequirement checks one requirement string. Errors wrap
// ErrRequirement and say what is wrong in plain words.
func ParseRequirement(s string) (Requirement, error) {
	bad := func(why string) (Requirement, error) {
		return Requirement{}, fmt.Errorf("%w %q: %s", ErrRequirement, s, why)
	}
	if len(s) > maxRequirementLen {
		return bad(fmt.Sprintf("longer than %d characters", maxRequirementLen))
	}
	t := strings.TrimSpace(s)
	switch {
	case t == "":
		return bad("empty")
	case strings.HasPrefix(t, "-"):
		return bad("pip options are not accepted; name a package")
	case strings.ContainsAny(t, "@"):
		return bad("direct references (name @ URL) are not installed; name a package on the index")
	case strings.Contains(t, "://") || strings.ContainsAny(t, "/\\"):
		return bad("URLs and paths are not installed; name a package on the index")
	case strings.ContainsAny(t, ";#\n\r\t\x00"):
		return bad("environment markers, comments and control characters are not accepted")
	}
	var r Requirement
	i := strings.IndexAny(t, "[<>=!~ ")
	if i < 0 {
		i = len(t)
	}
	r.Name, t = t[:i], strings.TrimSpace(t[i:])
	if !reqName.MatchString(r.Name) {
		return bad("not a distribution name (letters, digits, '.', '-' and '_')")
	}
	r.Key = NormalizeName(r.Name)
	if strings.HasPrefix(t, "[") {
		end := strings.Index(t, "]")
		if end < 0 {
			return bad("unclosed extras bracket")
		}
		for _, e := range strings.Split(t[1:end], ",") {
			e = strings.TrimSpace(e)
			if !reqName.MatchString(e) {
				return bad(fmt.Sprintf("%q is not an extra's name", e))
			}
			r.Extras = append(r.Extras, e)
		}
		t = strings.TrimSpace(t[end+1:])
	}
	if t != "" {
		var clauses []string
		for _, c := range strings.Split(t, ",") {
			m := reqClause.FindStringSubmatch(strings.TrimSpace(c))
			if m == nil {
				return bad(fmt.Sprintf("%q is not a version clause such as ==1.2 or >=1.0", strings.TrimSpace(c)))
			}
			clauses = append(clauses, m[1]+m[2])
		}
		r.Specifier = strings.Join(clauses, ",")
	}
	return r, nil
}

// ParseRequirements checks a call's list: at least one, at most
// MaxRequirements, each distribution named once.
func ParseRequirements(in []string) ([]Requirement, error) {
	if len(in) == 0 {
		return nil, fmt.Errorf("%w: name at least one package", ErrRequirement)
	}
	if len(in) > MaxRequirements {
		return nil, fmt.Errorf("%w: at most %d packages per call, got %d", ErrRequirement, MaxRequirements, len(in))
	}
	seen := map[string]bool{}
	out := make([]Requirement, 0, len(in))
	for _, s := range in {
		r, err := ParseRequirement(s)
		if err != nil {
			return nil, err
		}
		if seen[r.Key] {
			return nil, fmt.Errorf("%w: %s is named twice", ErrRequirement, r.Key)
		}
		seen[r.Key] = true
		out = append(out, r)
	}
	return out, nil
}
