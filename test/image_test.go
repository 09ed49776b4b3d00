//go:build linux

package integration

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

// The image test runs the image `make image` built under a real engine,
// podman, and drives `pyjail serve --http` in it over HTTP with the MCP
// client. On this Debian 12 host podman is 4.3.1 and must use runc (crun
// refuses the hybrid cgroup hierarchy), with explicit nofile/nproc limits
// (runc fails to set podman's default rlimits here: "error setting rlimit
// type 7: operation not permitted").

// imageRef is the name `podman load` gives the oci-archive: its index
// entry's ref.name.
const imageRef = "localhost/pyjail:latest"

// podmanBase is every podman call's global flags.
var podmanBase = []string{"--runtime", "/usr/sbin/runc"}

// fiveCaps are the capabilities deploy/kubernetes gives the pod.
const fiveCaps = "CHOWN,DAC_OVERRIDE,FOWNER,SETGID,SETUID"

// imageArchive is the oci-archive `make image` writes.
func imageArchive() string {
	if p := os.Getenv("PYJAIL_TEST_IMAGE"); p != "" {
		return p
	}
	return filepath.Join("..", "bin", "image", "pyjail.oci.tar")
}

// requireImage skips (or, under PYJAIL_TEST_MUST_RUN=1, fails) when podman,
// runc or the built image is missing, and loads the image.
func requireImage(t *testing.T) {
	t.Helper()
	requireRoot(t)
	reason := ""
	if _, err := exec.LookPath("podman"); err != nil {
		reason = "podman not installed (bash scripts/setup.sh --image)"
	} else if _, err := os.Stat("/usr/sbin/runc"); err != nil {
		reason = "/usr/sbin/runc not installed (bash scripts/setup.sh --image)"
	} else if _, err := os.Stat(imageArchive()); err != nil {
		reason = "no image at " + imageArchive() + " (make image)"
	}
	if reason != "" {
		if os.Getenv("PYJAIL_TEST_MUST_RUN") == "1" {
			t.Fatalf("PYJAIL_TEST_MUST_RUN=1 but %s", reason)
		}
		t.Skip(reason)
	}
	if out, err := podman("load", "-q", "-i", imageArchive()); err != nil {
		t.Fatalf("podman load: %v\n%s", err, out)
	}
}

func podman(args ...string) (string, error) {
	out, err := exec.Command("podman", append(append([]string{}, podmanBase...), args...)...).CombinedOutput()
	return string(out), err
}

// unifiedCgroup reports whether the host mounts only cgroup v2.
func unifiedCgroup() bool {
	_, err := os.Stat("/sys/fs/cgroup/cgroup.controllers")
	return err == nil
}

// containerMode is how a container gets what pyjail needs.
type containerMode struct {
	name string
	// flags are the security flags of podman run.
	flags []string
	// config is config.json's content.
	config string
	// owner owns the data directory on the host: the container's root.
	owner int
	// cgroupParent, in host-root mode, is made in the host's hierarchies.
	cgroupParent string
}

// userNSMode is deploy/kubernetes' pod: a user namespace of its own
// (hostUsers: false), the five capabilities, the node's seccomp profile,
// /proc unmasked (procMount: Unmasked), read-only root, no new privileges.
func userNSMode() containerMode {
	return containerMode{
		name: "user namespace, five capabilities",
		flags: []string{
			"--uidmap", "0:200000:65536", "--gidmap", "0:200000:65536",
			"--cap-drop", "ALL", "--cap-add", fiveCaps,
			"--security-opt", "seccomp=" + seccompProfile(),
			"--security-opt", "unmask=ALL", "--security-opt", "no-new-privileges",
		},
		config: `{"id_map": {"host_id": 16384, "size": 32768, "sandbox_id": 1000}, "max_concurrent": 4, "state_dir": "/run/pyjail", "cgroup_parent": "/pyjail"}`,
		owner:  200000,
	}
}

// hostRootMode is what a cgroup v1 (or hybrid) host needs: the container
// in the host's user namespace, with the capabilities libcontainer's root
// mode uses (its host-side mount helper needs SYS_ADMIN, SYS_PTRACE and
// SYS_CHROOT) and the host's cgroup hierarchies bound writable, because on
// v1 no cgroup can be delegated into a user namespace.
func hostRootMode(cgroupParent string) containerMode {
	return containerMode{
		name: "host root, cgroup v1",
		flags: []string{
			"--cap-drop", "ALL", "--cap-add", fiveCaps + ",SYS_ADMIN,SYS_PTRACE,SYS_CHROOT",
			"--security-opt", "seccomp=" + seccompProfile(),
			"--security-opt", "unmask=ALL", "--security-opt", "no-new-privileges",
			"--cgroupns=host", "-v", "/sys/fs/cgroup:/sys/fs/cgroup:rw",
		},
		config:       fmt.Sprintf(`{"max_concurrent": 4, "state_dir": "/run/pyjail", "cgroup_parent": %q}`, cgroupParent),
		owner:        0,
		cgroupParent: cgroupParent,
	}
}

func seccompProfile() string {
	p, _ := filepath.Abs(filepath.Join("..", "deploy", "kubernetes", "node", "seccomp-pyjail.json"))
	return p
}

// imageContainer is one pyjail server container and its host files.
type imageContainer struct {
	name, token   string
	port, metrics int
	mode          containerMode
	dir, tokens   string
	data, cfg     string
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func newImageContainer(t *testing.T, mode containerMode) *imageContainer {
	t.Helper()
	dir := t.TempDir()
	c := &imageContainer{
		name: fmt.Sprintf("pyjail-test-%d", os.Getpid()), mode: mode, dir: dir,
		port: freePort(t), metrics: freePort(t),
		tokens: filepath.Join(dir, "tokens"), data: filepath.Join(dir, "data"), cfg: filepath.Join(dir, "config.json"),
	}
	for _, d := range []string{c.tokens, c.data} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(c.cfg, []byte(mode.config), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(filepath.Join("..", "bin", "pyjail"), "token", "add", "--tokens", filepath.Join(c.tokens, "tokens"), "alice").CombinedOutput()
	if err != nil {
		t.Fatalf("pyjail token add: %v\n%s", err, out)
	}
	c.token = strings.Fields(string(out))[0]
	for _, p := range []string{c.tokens, filepath.Join(c.tokens, "tokens"), c.data} {
		if err := os.Lchown(p, mode.owner, mode.owner); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		if out, err := podman("rm", "-f", "-t", "0", c.name); err != nil {
			t.Logf("podman rm: %v\n%s", err, out)
		}
	})
	return c
}

// run starts the server container, detached, and waits for /readyz.
func (c *imageContainer) run(t *testing.T) time.Duration {
	t.Helper()
	args := []string{"run", "-d", "--name", c.name,
		"--ulimit", "nofile=1024:1024", "--ulimit", "nproc=1024:1024",
		"--read-only", "--tmpfs", "/run/pyjail", "--tmpfs", "/tmp",
		"-p", fmt.Sprintf("127.0.0.1:%d:8080", c.port), "-p", fmt.Sprintf("127.0.0.1:%d:9090", c.metrics),
		"-v", c.cfg + ":/etc/pyjail/config/config.json:ro",
		"-v", c.tokens + ":/etc/pyjail/tokens:ro",
		"-v", c.data + ":/var/lib/pyjail/data",
	}
	args = append(args, c.mode.flags...)
	args = append(args, imageRef, "serve", "--config=/etc/pyjail/config/config.json",
		"--http=:8080", "--insecure-behind-proxy", "--allowed-hosts=127.0.0.1",
		"--tokens=/etc/pyjail/tokens/tokens", "--data-dir=/var/lib/pyjail/data", "--metrics=:9090")
	start := time.Now()
	if out, err := podman(args...); err != nil {
		t.Fatalf("podman run: %v\n%s", err, out)
	}
	c.waitReady(t)
	return time.Since(start)
}

// waitReady polls /readyz through the published metrics port.
func (c *imageContainer) waitReady(t *testing.T) {
	t.Helper()
	url := fmt.Sprintf("http://127.0.0.1:%d/readyz", c.metrics)
	deadline := time.Now().Add(90 * time.Second)
	for {
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) {
			logs, _ := podman("logs", c.name)
			t.Fatalf("%s not ready after 90 s (last: %v)\n%s", url, err, logs)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

func (c *imageContainer) client(t *testing.T, ctx context.Context) *client.Client {
	t.Helper()
	cl, err := client.NewStreamableHttpClient(fmt.Sprintf("http://127.0.0.1:%d/mcp", c.port),
		transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + c.token}))
	if err != nil {
		t.Fatal(err)
	}
	if err := cl.Start(ctx); err != nil {
		t.Fatal(err)
	}
	req := mcp.InitializeRequest{}
	req.Params.ProtocolVersion = mcp.LATEST_PROTOCOL_VERSION
	req.Params.ClientInfo = mcp.Implementation{Name: "image-test", Version: "1"}
	if _, err := cl.Initialize(ctx, req); err != nil {
		t.Fatalf("initialize: %v", err)
	}
	t.Cleanup(func() { _ = cl.Close() })
	return cl
}

// callTool calls a tool and returns its text and whether it is an error
// result.
func callTool(t *testing.T, ctx context.Context, cl *client.Client, name string, args map[string]any) (string, bool) {
	t.Helper()
	req := mcp.CallToolRequest{}
	req.Params.Name = name
	req.Params.Arguments = args
	res, err := cl.CallTool(ctx, req)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String(), res.IsError
}

// TestImageServesUnderPodman runs the image as deploy/kubernetes' pod
// would (user namespace, five capabilities) where the host allows it
// (cgroup v2), and in host-root mode on a cgroup v1 host, where it checks
// that the pod's mode is refused with the reason. In the container: doctor
// --start-jail passes, run_python answers, the tokens and the host stay out
// of the jail's reach, and tenant data and snapshots on the volume survive
// a restart of the container.
func TestImageServesUnderPodman(t *testing.T) {
	requireImage(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	mode := userNSMode()
	if !unifiedCgroup() {
		refusedOnCgroupV1(t, mode)
		mode = hostRootMode(fmt.Sprintf("/pyjail-image-test-%d", os.Getpid()))
		t.Cleanup(func() { removeCgroupParent(mode) })
	}
	t.Logf("mode: %s", mode.name)
	c := newImageContainer(t, mode)
	took := c.run(t)
	t.Logf("container start to ready: %v", took)

	out, err := podman("exec", c.name, "/usr/local/bin/pyjail", "doctor", "--config", "/etc/pyjail/config/config.json", "--start-jail")
	if err != nil || !strings.Contains(out, "All required layers are active.") {
		t.Fatalf("doctor --start-jail in the container: %v\n%s", err, out)
	}

	// No token, a wrong token: refused before any tool runs.
	for _, auth := range []string{"", "Bearer pyjail_wrong"} {
		req, _ := http.NewRequest(http.MethodPost, fmt.Sprintf("http://127.0.0.1:%d/mcp", c.port),
			strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("POST /mcp with Authorization %q: status %d, want 401", auth, resp.StatusCode)
		}
	}

	cl := c.client(t, ctx)
	if text, isErr := callTool(t, ctx, cl, "run_python", map[string]any{"code": "print(6*7)"}); isErr || !strings.Contains(text, "42") {
		t.Fatalf("run_python: error=%v %q", isErr, text)
	}
	// The jail sees its own rootfs, not the container's: neither the
	// tokens, the binary nor the configuration. The Python rules refuse os and socket in both tools (PJ003), so the
	// probe uses the confined open() only.
	probe := `for p in ["/etc/pyjail/tokens/tokens", "/usr/local/bin/pyjail", "/etc/pyjail/config/config.json"]:
    try:
        open(p, "rb").close(); print(p, "open")
    except OSError as e:
        print(p, "refused", type(e).__name__)`
	text, isErr := callTool(t, ctx, cl, "run_sandbox_code", map[string]any{"code": probe})
	if isErr {
		t.Fatalf("probe: %s", text)
	}
	for _, p := range []string{"/etc/pyjail/tokens/tokens", "/usr/local/bin/pyjail", "/etc/pyjail/config/config.json"} {
		if !strings.Contains(text, p+" refused") {
			t.Errorf("the jail reaches the container's %s:\n%s", p, text)
		}
	}

	const content = "survives a restart\n"
	if text, isErr := callTool(t, ctx, cl, "write_workspace_file", map[string]any{"path": "notes/a.txt", "content": content}); isErr {
		t.Fatalf("write_workspace_file: %s", text)
	}
	snapText, isErr := callTool(t, ctx, cl, "create_state_snapshot", map[string]any{"description": "before restart"})
	if isErr {
		t.Fatalf("create_state_snapshot: %s", snapText)
	}

	// Restart: the container's own filesystem (read-only) and its tmpfs
	// state go; the data volume stays.
	if out, err := podman("stop", "-t", "30", c.name); err != nil {
		t.Fatalf("podman stop: %v\n%s", err, out)
	}
	if out, err := podman("start", c.name); err != nil {
		t.Fatalf("podman start: %v\n%s", err, out)
	}
	c.waitReady(t)
	cl2 := c.client(t, ctx)
	if text, isErr := callTool(t, ctx, cl2, "read_workspace_file", map[string]any{"path": "notes/a.txt"}); isErr || !strings.Contains(text, strings.TrimSpace(content)) {
		t.Errorf("read_workspace_file after restart: error=%v %q", isErr, text)
	}
	if text, isErr := callTool(t, ctx, cl2, "list_state_snapshots", map[string]any{}); isErr || !strings.Contains(text, "before restart") {
		t.Errorf("list_state_snapshots after restart: error=%v %q (created: %q)", isErr, text, snapText)
	}
	if text, isErr := callTool(t, ctx, cl2, "run_sandbox_code", map[string]any{"code": "print(open('notes/a.txt').read())"}); isErr || !strings.Contains(text, strings.TrimSpace(content)) {
		t.Errorf("run_sandbox_code reading the workspace after restart: error=%v %q", isErr, text)
	}
}

// refusedOnCgroupV1 checks that the pod's mode is refused on a cgroup v1
// host, by doctor, with the reason: no cgroup can be delegated into a user
// namespace there, so jails would have no memory, pids or CPU limits.
func refusedOnCgroupV1(t *testing.T, mode containerMode) {
	t.Helper()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "config.json")
	if err := os.WriteFile(cfg, []byte(mode.config), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	args := []string{"run", "--rm", "--ulimit", "nofile=1024:1024", "--ulimit", "nproc=1024:1024",
		"--read-only", "--tmpfs", "/run/pyjail", "--tmpfs", "/tmp", "-v", cfg + ":/etc/pyjail/config/config.json:ro"}
	args = append(args, mode.flags...)
	args = append(args, imageRef, "doctor", "--config", "/etc/pyjail/config/config.json", "--start-jail")
	out, err := podman(args...)
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("doctor in the pod's mode on cgroup v1: %v, want exit 1\n%s", err, out)
	}
	for _, want := range []string{"rootless_cgroup   MISSING", "start_jail        MISSING", "rootfs            ok", "seccomp           ok", "user_namespace    ok"} {
		if !strings.Contains(out, want) {
			t.Errorf("doctor in the pod's mode on cgroup v1 lacks %q:\n%s", want, out)
		}
	}
}

// removeCgroupParent removes the host-root container's cgroup parent from
// every v1 hierarchy (the container's pyjail removes its jails' cgroups,
// not the parent it was given).
func removeCgroupParent(mode containerMode) {
	if mode.cgroupParent == "" {
		return
	}
	entries, _ := os.ReadDir("/sys/fs/cgroup")
	for _, e := range entries {
		_ = os.Remove(filepath.Join("/sys/fs/cgroup", e.Name(), mode.cgroupParent))
	}
}
