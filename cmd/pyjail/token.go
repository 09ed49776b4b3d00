package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/pyjail/pyjail/mcpserver/tokens"
)

const tokenUsage = `Usage:
  pyjail token add    [--tokens FILE] [--rotate] [--operator] [--quota KEY=VALUE]...
                      [--egress-hosts HOST,...] [--config FILE] NAME
  pyjail token list   [--tokens FILE]
  pyjail token remove [--tokens FILE] NAME

add prints a new token for tenant NAME once, on stdout, and stores only its
sha256; --rotate gives an existing tenant a new token (the old one stops
working when the server reloads the file). Quota keys: concurrent_runs,
runs_per_minute, workspace_bytes, workspace_files, snapshots, snapshot_bytes
(0 = the server default). --egress-hosts narrows the tenant's network to
these hosts (exact names or *.suffix; "" for none): each must lie inside the
egress rules of every profile with egress in --config (the server's config),
so a tenant is narrowed, never widened. A running server reloads the file within a few
seconds, or at once on SIGHUP (systemctl reload pyjail).
`

// quotaFlags collects repeated --quota KEY=VALUE flags.
type quotaFlags []string

func (q *quotaFlags) String() string     { return strings.Join(*q, " ") }
func (q *quotaFlags) Set(s string) error { *q = append(*q, s); return nil }

func cmdToken(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, tokenUsage)
		return exitUsage
	}
	sub, args := args[0], args[1:]
	fs := flag.NewFlagSet("token "+sub, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, tokenUsage); fs.PrintDefaults() }
	path := fs.String("tokens", tokens.DefaultPath(), "tokens file (JSON if its name ends in .json, else one tenant per line)")
	var (
		rotate   *bool
		operator *bool
		quota    quotaFlags
		egressTo *string
		config   *string
	)
	switch sub {
	case "add":
		rotate = fs.Bool("rotate", false, "replace the token of an existing tenant")
		operator = fs.Bool("operator", false, "let the tenant see operator-only figures (--operator=false to revoke on --rotate)")
		fs.Var(&quota, "quota", "quota override KEY=VALUE (repeatable); *_bytes take KiB, MiB, GiB, TiB")
		egressTo = fs.String("egress-hosts", "", `narrow the tenant's egress to these hosts, comma-separated ("" for none); checked against --config`)
		config = fs.String("config", "", "the server's configuration file, whose egress rules --egress-hosts must lie inside")
	case "list", "remove":
	case "help", "-h", "--help":
		fmt.Fprint(stdout, tokenUsage)
		return exitOK
	default:
		fmt.Fprintf(stderr, "pyjail token: unknown subcommand %q\n\n%s", sub, tokenUsage)
		return exitUsage
	}
	names, err := parseInterspersed(fs, args)
	if err != nil {
		return exitUsage
	}
	want := 1
	if sub == "list" {
		want = 0
	}
	if len(names) != want {
		fmt.Fprintf(stderr, "pyjail token %s: want %d tenant name argument(s), got %q\n", sub, want, names)
		return exitUsage
	}

	switch sub {
	case "add":
		opt := tokens.AddOptions{Rotate: *rotate, Quota: quota}
		var narrow bool
		fs.Visit(func(f *flag.Flag) {
			switch f.Name {
			case "operator":
				opt.Operator = operator
			case "egress-hosts":
				narrow = true
			}
		})
		if narrow {
			hosts, err := checkNarrowing(*config, *egressTo)
			if err != nil {
				fmt.Fprintf(stderr, "pyjail token add: --egress-hosts: %v\n", err)
				return exitUsage
			}
			opt.EgressHosts = &hosts
		}
		token, err := tokens.Add(*path, names[0], opt)
		if err != nil {
			if errors.Is(err, tokens.ErrTenantExists) {
				err = fmt.Errorf("%w; use --rotate to give it a new token", err)
			}
			fmt.Fprintf(stderr, "pyjail token add: %v\n", err)
			return exitNotOK
		}
		// The token alone on stdout, so TOKEN=$(pyjail token add NAME)
		// works; the notice goes to the terminal.
		fmt.Fprintln(stdout, token)
		verb := "added tenant"
		if *rotate {
			verb = "rotated the token of tenant"
		}
		fmt.Fprintf(stderr, "pyjail: %s %q in %s.\nThe token above will not be shown again: only its sha256 is stored. "+
			"Clients send it as \"Authorization: Bearer <token>\".\n", verb, names[0], *path)
		return exitOK
	case "remove":
		if err := tokens.Remove(*path, names[0]); err != nil {
			fmt.Fprintf(stderr, "pyjail token remove: %v\n", err)
			return exitNotOK
		}
		fmt.Fprintf(stderr, "pyjail: removed tenant %q from %s; its data under --data-dir stays until deleted.\n", names[0], *path)
		return exitOK
	default: // list
		f, err := tokens.ReadFile(*path)
		if err != nil {
			fmt.Fprintf(stderr, "pyjail token list: %v\n", err)
			return exitNotOK
		}
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "TENANT\tOPERATOR\tSHA256\tQUOTA\tEGRESS")
		for _, e := range f.Entries {
			op := "no"
			if e.Tenant.Operator {
				op = "yes"
			}
			egress := "profiles' rules"
			if n := e.Tenant.Egress; n.Set {
				egress = "only " + n.Hosts
				if n.Hosts == "" {
					egress = "no host"
				}
			}
			fmt.Fprintf(tw, "%s\t%s\t%s…\t%s\t%s\n", e.Tenant.Name, op, e.SHA256.Short(), e.Tenant.Quota, egress)
		}
		tw.Flush()
		return exitOK
	}
}

// parseInterspersed parses flags that may come before or after the
// positional arguments ("token add NAME --rotate"), which package flag
// alone stops at; "--" ends the flags.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		if len(args) > 0 && len(rest) < len(args) && args[len(args)-len(rest)-1] == "--" {
			return append(pos, rest...), nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// checkNarrowing parses --egress-hosts and checks it against the egress
// profiles of the config at path: every pattern must lie inside the rules
// of each of them (policy.Egress.Narrow, as the server applies it to every
// run), and there must be one. "" is the empty list: no host at all.
func checkNarrowing(path, list string) ([]string, error) {
	hosts := []string{}
	for _, h := range strings.Split(list, ",") {
		if h = strings.TrimSpace(h); h != "" {
			hosts = append(hosts, h)
		}
	}
	c := commonFlags{config: path}
	cfg, err := c.loadConfig()
	if err != nil {
		return nil, err
	}
	var profiles int
	for _, name := range cfg.ProfileNames() {
		e := cfg.Profiles[name].Egress
		if e == nil {
			continue
		}
		profiles++
		if _, err := e.Narrow(hosts); err != nil {
			return nil, fmt.Errorf("profile %s: %w", name, err)
		}
	}
	if profiles == 0 && len(hosts) > 0 {
		where := "the built-in defaults"
		if path != "" {
			where = path
		}
		return nil, fmt.Errorf("no profile in %s has egress, so any host would widen the tenant's network (pass the server's config with --config)", where)
	}
	return hosts, nil
}
