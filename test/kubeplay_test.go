//go:build linux

package integration

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestKubePlayOverlay renders deploy/kubernetes/overlays/podman with
// kubectl kustomize and plays it with `podman kube play`: the pod starts
// with the manifests' own security context (user namespace of 65536 ids,
// the five capabilities and no other, read-only root, no new privileges,
// the node's seccomp profile) and its init container runs `doctor
// --start-jail`. On a cgroup v1 host that init container must refuse, with
// the reason, and the server container must never start: no cgroup can be
// delegated into a user namespace there. On cgroup v2 the server container
// must come up and pass doctor itself.
func TestKubePlayOverlay(t *testing.T) {
	requireImage(t)
	// kubectl is no Debian 12 package, so setup.sh cannot install it: its
	// absence skips this test even under PYJAIL_TEST_MUST_RUN=1.
	if _, err := exec.LookPath("kubectl"); err != nil {
		t.Skip("kubectl not installed: it renders the kustomize overlay (kubectl kustomize)")
	}
	dir := t.TempDir()
	rendered, err := exec.Command("kubectl", "kustomize", filepath.Join("..", "deploy", "kubernetes", "overlays", "podman")).Output()
	if err != nil {
		t.Fatalf("kubectl kustomize: %v", err)
	}
	play := filepath.Join(dir, "pyjail.yaml")
	if err := os.WriteFile(play, rendered, 0o644); err != nil {
		t.Fatal(err)
	}
	profiles := filepath.Join(dir, "seccomp", "profiles")
	if err := os.MkdirAll(profiles, 0o755); err != nil {
		t.Fatal(err)
	}
	prof, err := os.ReadFile(seccompProfile())
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(profiles, "pyjail.json"), prof, 0o644); err != nil {
		t.Fatal(err)
	}
	// kube play has no --ulimit in 4.3.1: the limits runc can set here
	// come from a containers.conf of the test's own.
	conf := filepath.Join(dir, "containers.conf")
	if err := os.WriteFile(conf, []byte("[containers]\ndefault_ulimits = [\"nofile=1024:1024\", \"nproc=1024:1024\"]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	kube := func(args ...string) (string, error) {
		cmd := exec.Command("podman", append(append([]string{}, podmanBase...), args...)...)
		cmd.Env = append(os.Environ(), "CONTAINERS_CONF="+conf)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	down := func() {
		_, _ = kube("kube", "down", play)
		_, _ = podman("volume", "rm", "-f", "pyjail-data")
		_, _ = podman("secret", "rm", "pyjail-tokens")
	}
	down()
	t.Cleanup(down)

	out, playErr := kube("kube", "play", "--userns=auto:size=65536", "--seccomp-profile-root", filepath.Join(dir, "seccomp"), play)
	t.Logf("kube play: %v\n%s", playErr, lastLines(out, 5))

	const doctor, server = "pyjail-pod-0-doctor", "pyjail-pod-0-pyjail"
	insp, err := podman("inspect", doctor, "--format", "{{.EffectiveCaps}} {{json .HostConfig.IDMappings}} ro={{.HostConfig.ReadonlyRootfs}} {{.HostConfig.SecurityOpt}}")
	if err != nil {
		t.Fatalf("podman inspect %s: %v\n%s", doctor, err, insp)
	}
	for _, want := range []string{"[CAP_CHOWN CAP_DAC_OVERRIDE CAP_FOWNER CAP_SETGID CAP_SETUID]", `"UidMap":["0:`, `:65536"]`, "ro=true", "no-new-privileges"} {
		if !strings.Contains(insp, want) {
			t.Errorf("the init container's settings lack %q: %s", want, insp)
		}
	}
	logs, _ := podman("logs", doctor)
	if !unifiedCgroup() {
		if playErr == nil || !strings.Contains(out, "init container") {
			t.Errorf("kube play on cgroup v1 did not fail at the init container: %v\n%s", playErr, out)
		}
		for _, want := range []string{"rootless_cgroup   MISSING", "rootfs            ok", "seccomp           ok", "root              ok              root of a user namespace", "pyjail will refuse to run code"} {
			if !strings.Contains(logs, want) {
				t.Errorf("doctor's log lacks %q:\n%s", want, logs)
			}
		}
		state, _ := podman("inspect", server, "--format", "{{.State.Status}}")
		if strings.TrimSpace(state) != "created" {
			t.Errorf("the server container is %q, want never started (created)", strings.TrimSpace(state))
		}
		return
	}
	if playErr != nil {
		t.Fatalf("kube play: %v\n%s\ndoctor:\n%s", playErr, out, logs)
	}
	deadline := time.Now().Add(90 * time.Second)
	for {
		o, err := podman("exec", server, "/usr/local/bin/pyjail", "doctor", "--config", "/etc/pyjail/config/config.json", "--start-jail")
		if err == nil && strings.Contains(o, "All required layers are active.") {
			break
		}
		if time.Now().After(deadline) {
			l, _ := podman("logs", server)
			t.Fatalf("doctor in the played server container: %v\n%s\nserver log:\n%s", err, o, l)
		}
		time.Sleep(time.Second)
	}
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
