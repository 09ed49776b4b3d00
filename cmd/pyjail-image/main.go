package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/pyjail/pyjail/image"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "pyjail-image:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context) error {
	var cfg image.Config
	var out, ref string
	flag.StringVar(&cfg.BaseTar, "base", "", "the Debian base tar (scripts/image-base.sh)")
	flag.StringVar(&cfg.Binary, "binary", "bin/pyjail", "the pyjail binary")
	flag.StringVar(&cfg.Rootfs, "rootfs", "/var/lib/pyjail/rootfs", "a built Python rootfs (read only)")
	flag.StringVar(&cfg.Source, "source", "", "org.opencontainers.image.source")
	flag.StringVar(&cfg.Revision, "revision", "", "org.opencontainers.image.revision")
	flag.StringVar(&cfg.Version, "version", "dev", "org.opencontainers.image.version")
	flag.StringVar(&cfg.CacheDir, "cache", "bin/image/cache", "layer cache")
	flag.StringVar(&out, "out", "bin/image", "output directory: oci/ (layout), pyjail.oci.tar, digest, packages.txt")
	flag.StringVar(&ref, "ref", "pyjail:latest", "the image's name in the layout and archive")
	flag.Parse()
	sde := os.Getenv("SOURCE_DATE_EPOCH")
	if sde == "" {
		return fmt.Errorf("SOURCE_DATE_EPOCH is not set")
	}
	secs, err := strconv.ParseInt(sde, 10, 64)
	if err != nil {
		return fmt.Errorf("parsing SOURCE_DATE_EPOCH %q: %w", sde, err)
	}
	cfg.Epoch = time.Unix(secs, 0)
	cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, nil))

	start := time.Now()
	res, err := image.Build(ctx, cfg)
	if err != nil {
		return err
	}
	dir := filepath.Join(out, "oci")
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	if err := image.WriteLayout(dir, res.Image, ref); err != nil {
		return err
	}
	archive := filepath.Join(out, "pyjail.oci.tar")
	if err := image.WriteArchive(archive, dir, cfg.Epoch); err != nil {
		return err
	}
	var b strings.Builder
	for _, p := range res.Packages {
		fmt.Fprintf(&b, "%s\t%s\t%s\n", p.Where, p.Name, p.Version)
	}
	if err := os.WriteFile(filepath.Join(out, "packages.txt"), []byte(b.String()), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(out, "digest"), []byte(res.Digest.String()+"\n"), 0o644); err != nil {
		return err
	}
	fi, err := os.Stat(archive)
	if err != nil {
		return err
	}
	cfg.Logger.Info("image", "digest", res.Digest.String(), "archive", archive,
		"MiB", fmt.Sprintf("%.1f", float64(fi.Size())/(1<<20)), "packages", len(res.Packages),
		"took", time.Since(start).Round(100*time.Millisecond))
	fmt.Print(b.String())
	fmt.Println(res.Digest.String())
	return nil
}
