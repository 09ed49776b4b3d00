package tokens

import "strings"

// Right is one kind of thing a caller may do (SPEC §14). Every tool needs
// at most one; a sign-in token's scopes map to rights, and a static token
// from the tokens file has the rights its entry implies.
type Right uint8

// The rights. Reading the validators and the caller's own status needs
// none: any authenticated caller may.
const (
	// RightRun: run code (run_python, run_sandbox_code) and keep sessions.
	RightRun Right = 1 << iota
	// RightWorkspace: the tenant's workspace files and snapshots.
	RightWorkspace
	// RightOperator: server-wide figures (sandbox://status) and other
	// tenants' counts.
	RightOperator
)

// Rights is a set of Right.
type Rights uint8

// Has reports whether r holds every right of want.
func (r Rights) Has(want Right) bool { return Rights(want)&r == Rights(want) }

// String names the rights, for messages: "run, workspace".
func (r Rights) String() string {
	var names []string
	for _, x := range []Right{RightRun, RightWorkspace, RightOperator} {
		if r.Has(x) {
			names = append(names, x.String())
		}
	}
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

// String is the right's name: run, workspace or operator.
func (r Right) String() string {
	switch r {
	case RightRun:
		return "run"
	case RightWorkspace:
		return "workspace"
	case RightOperator:
		return "operator"
	}
	return "none"
}

// Rights returns what t may do. A tenant of the tokens file (Scoped
// false) may run code and use its workspace, and see server-wide figures
// when it is an operator; a signed-in caller has exactly the rights its
// token's scopes grant (Granted).
func (t Tenant) Rights() Rights {
	if t.Scoped {
		return t.Granted
	}
	r := Rights(RightRun) | Rights(RightWorkspace)
	if t.Operator {
		r |= Rights(RightOperator)
	}
	return r
}
