package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/pyjail/pyjail/egress"
	"github.com/pyjail/pyjail/jail"
	"github.com/pyjail/pyjail/policy"
	"github.com/pyjail/pyjail/rootfs"
)

// commonFlags are shared by the commands that build jails.
type commonFlags struct {
	config   string
	rootfs   string
	logLevel string
}

func (c *commonFlags) register(fs *flag.FlagSet) { c.registerLevel(fs, "info") }

// registerLevel registers the flags with a command's default log level:
// one-shot commands keep stderr for the program's own output.
func (c *commonFlags) registerLevel(fs *flag.FlagSet, level string) {
	fs.StringVar(&c.config, "config", "", "configuration file (JSON); built-in defaults without it")
	fs.StringVar(&c.rootfs, "rootfs", "", `Python rootfs directory, or "host" (default: the built rootfs if present, else host)`)
	fs.StringVar(&c.logLevel, "log-level", level, "log level: debug, info, warn, error")
}

func (c *commonFlags) loadConfig() (policy.Config, error) {
	if c.config == "" {
		return userDefaults(policy.Default()), nil
	}
	b, err := os.ReadFile(c.config)
	if err != nil {
		return policy.Config{}, fmt.Errorf("reading config: %w", err)
	}
	cfg, err := policy.Load(b)
	if err != nil {
		return policy.Config{}, fmt.Errorf("loading %q: %w", c.config, err)
	}
	return userDefaults(cfg), nil
}

// userDefaults moves the state directory of a user who is not host root
// from /run/pyjail, which such a user cannot create, to the user's runtime
// directory ($XDG_RUNTIME_DIR/pyjail, /run/user/<uid>/pyjail: made by
// logind for each user, private, and emptied at the user's last logout),
// unless the config chose one. A system unit's user (the rootless unit)
// has no XDG_RUNTIME_DIR and keeps /run/pyjail, its RuntimeDirectory.
func userDefaults(cfg policy.Config) policy.Config {
	run := os.Getenv("XDG_RUNTIME_DIR")
	if !hostRoot() && filepath.IsAbs(run) && cfg.StateDir == policy.Default().StateDir {
		cfg.StateDir = filepath.Join(run, "pyjail")
	}
	return cfg
}

// openRootfs picks the rootfs: an explicit --rootfs, else the built one
// at the default location, else the host rootfs. A built rootfs that fails
// verification is refused, never silently replaced by the host one.
func (c *commonFlags) openRootfs(cfg policy.Config) (*rootfs.Layout, error) {
	switch c.rootfs {
	case "host":
		return rootfs.PrepareHost(filepath.Join(cfg.StateDir, "rootfs"), rootfs.DefaultHostSpec(cfg.IDMap))
	case "":
		for _, dir := range defaultRootfsDirs() {
			if _, err := os.Stat(dir); err == nil {
				return rootfs.OpenDebian(dir)
			}
		}
		return rootfs.PrepareHost(filepath.Join(cfg.StateDir, "rootfs"), rootfs.DefaultHostSpec(cfg.IDMap))
	default:
		return rootfs.OpenDebian(c.rootfs)
	}
}

// defaultRootfsDirs are where a built rootfs is looked for, in order: for
// host root the system's; for anyone else the user's own
// (~/.local/share/pyjail/rootfs), then the system's, which a user may
// read but not build (a desktop user's stdio server uses the rootfs root
// built once for the machine).
func defaultRootfsDirs() []string {
	if hostRoot() {
		return []string{rootfs.SystemDir}
	}
	return []string{rootfs.UserDir(), rootfs.SystemDir}
}

// newJail loads the config, the rootfs and the jail, logging every seccomp
// relaxation so operators see what the policy gives away.
func (c *commonFlags) newJail(ctx context.Context, log *slog.Logger, configure ...func(*jail.Config, policy.Config) error) (*jail.Jail, policy.Config, *rootfs.Layout, error) {
	cfg, err := c.loadConfig()
	if err != nil {
		return nil, cfg, nil, err
	}
	layout, err := c.openRootfs(cfg)
	if err != nil {
		return nil, cfg, nil, fmt.Errorf("opening rootfs: %w", err)
	}
	for _, w := range policy.SeccompWarnings(cfg.Seccomp) {
		log.Info("seccomp relaxation", "relaxation", w)
	}
	jcfg := jail.Config{Policy: cfg, Rootfs: layout, Logger: log}
	for _, name := range cfg.ProfileNames() {
		if e := cfg.Profiles[name].Egress; e != nil {
			// One gateway serves every egress profile; each run gets its
			// own socket and policy from it.
			if jcfg.Egress == nil {
				jcfg.Egress = egress.New(egress.Config{Logger: log.With("component", "egress")})
			}
			log.Info("egress open", "profile", name, "hosts", e.Hosts(), "limits", e.Limits.Effective())
		}
	}
	for _, f := range configure {
		if err := f(&jcfg, cfg); err != nil {
			return nil, cfg, nil, err
		}
	}
	j, err := jail.New(ctx, jcfg)
	if err != nil {
		if errors.Is(err, jail.ErrNotRoot) || errors.Is(err, jail.ErrLayerMissing) {
			err = fmt.Errorf("%w\nrun `pyjail doctor` for details", err)
		}
		return nil, cfg, layout, err
	}
	return j, cfg, layout, nil
}
