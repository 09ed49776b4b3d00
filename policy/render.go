package policy

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
)

// Render returns s as plain text, one line per rule after a short header,
// in the order of s.Rules. The output is deterministic, so that a golden
// copy in testdata turns every policy change into a reviewable diff (as
// gVisor's dumpfilter does). A line reads
//
//	allow      clone  arg0&0x7e020080==0x0  # why
func (s Seccomp) Render() string {
	var b strings.Builder
	fmt.Fprintf(&b, "default %s\n", renderAction(s.DefaultAction, s.DefaultErrno))
	fmt.Fprintf(&b, "arch %s\n", oneLine(strings.Join(s.Architectures, ",")))
	for _, r := range s.Rules {
		fmt.Fprintf(&b, "%-13s %s", renderAction(r.Action, r.Errno), oneLine(strings.Join(r.Names, ",")))
		for _, a := range r.Args {
			b.WriteString("  " + renderArg(a))
		}
		fmt.Fprintf(&b, "  # %s\n", oneLine(r.Why))
	}
	return b.String()
}

func renderAction(a Action, errno uint) string {
	if a != ActErrno {
		return oneLine(string(a))
	}
	switch errno {
	case 0, ErrnoEPERM:
		return "errno(EPERM)"
	case ErrnoENOSYS:
		return "errno(ENOSYS)"
	}
	return fmt.Sprintf("errno(%d)", errno)
}

func renderArg(a Arg) string {
	if a.Op == OpMaskedEqual {
		return fmt.Sprintf("arg%d&%#x==%#x", a.Index, a.Value, a.ValueTwo)
	}
	return fmt.Sprintf("arg%d%s%#x", a.Index, oneLine(string(a.Op)), a.Value)
}

// oneLine keeps a field on its line: text with anything unprintable
// (newlines included) is quoted, so no rule can spill onto the next line or
// forge one.
func oneLine(s string) string {
	if strings.IndexFunc(s, func(r rune) bool { return !unicode.IsPrint(r) }) >= 0 {
		return strconv.Quote(s)
	}
	return s
}
