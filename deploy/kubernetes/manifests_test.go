package kubernetes

import (
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/pyjail/pyjail/policy"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	nodev1 "k8s.io/api/node/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
)

const (
	baseDir    = "base"
	exampleDir = "overlays/example"
	// jailCapabilities is everything the pod adds after dropping ALL:
	// the capabilities pyjail uses in the pod's user namespace
	// (README.md, "Security context").
	wantCaps = "CHOWN,DAC_OVERRIDE,FOWNER,SETGID,SETUID"
	// seccompPath is the localhost profile's path below the kubelet's
	// seccomp root (/var/lib/kubelet/seccomp); README.md tells where to
	// install node/seccomp-pyjail.json.
	seccompPath  = "profiles/pyjail.json"
	apparmorName = "pyjail"
	// MiB is a mebibyte in bytes.
	MiB = 1 << 20
	// serverRSS is the server's own memory, measured (README.md,
	// Performance).
	serverRSS = 20 * MiB
)

// TestEveryManifestDecodesStrictly walks every YAML file of the kustomize
// trees: each must decode without unknown or duplicate fields into its
// Kubernetes API type (or kustomize's), and each must be used by the
// kustomization of its directory, so none can rot unnoticed.
func TestEveryManifestDecodesStrictly(t *testing.T) {
	used := map[string]bool{}
	var files []string
	for _, root := range kustomizeDirs {
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() || !strings.HasSuffix(p, ".yaml") {
				return nil
			}
			files = append(files, p)
			if filepath.Base(p) == "kustomization.yaml" {
				tr := loadTree(t, filepath.Dir(p))
				for _, m := range slices.Concat(tr.objects, tr.patches) {
					used[m.path] = true
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if len(files) < 15 {
		t.Fatalf("found only %d manifests; is the test running in deploy/kubernetes?", len(files))
	}
	for _, f := range files {
		decodeFile(t, f) // fails the test on any strictness error
		if filepath.Base(f) != "kustomization.yaml" && !used[f] {
			t.Errorf("%s is not referenced by any kustomization", f)
		}
	}
}

func baseDeployment(t *testing.T) *appsv1.Deployment {
	t.Helper()
	return find[*appsv1.Deployment](t, loadTree(t, baseDir).objects, "pyjail")
}

// TestPodSecurityContext checks the pod gets exactly what building jails
// needs: its own user namespace, root in it, five capabilities, an
// unmasked /proc, the localhost seccomp and AppArmor profiles, and
// nothing of the host.
func TestPodSecurityContext(t *testing.T) {
	d := baseDeployment(t)
	spec := d.Spec.Template.Spec
	if spec.HostUsers == nil || *spec.HostUsers {
		t.Errorf("hostUsers = %v, want false: pyjail must run in a user namespace of its own", spec.HostUsers)
	}
	if spec.HostNetwork || spec.HostPID || spec.HostIPC {
		t.Errorf("host namespaces shared: network %v, pid %v, ipc %v", spec.HostNetwork, spec.HostPID, spec.HostIPC)
	}
	if spec.ShareProcessNamespace != nil && *spec.ShareProcessNamespace {
		t.Error("shareProcessNamespace set")
	}
	if spec.AutomountServiceAccountToken == nil || *spec.AutomountServiceAccountToken {
		t.Error("the service account token is mounted; pyjail calls no Kubernetes API")
	}
	psc := spec.SecurityContext
	if psc == nil {
		t.Fatal("no pod security context")
	}
	if psc.RunAsUser == nil || *psc.RunAsUser != 0 || psc.RunAsGroup == nil || *psc.RunAsGroup != 0 {
		t.Errorf("runAsUser/runAsGroup = %v/%v, want 0/0 (root in the pod's user namespace)", psc.RunAsUser, psc.RunAsGroup)
	}
	if len(psc.Sysctls) > 0 {
		t.Errorf("sysctls %v: pyjail needs none", psc.Sysctls)
	}
	if sp := psc.SeccompProfile; sp == nil || sp.Type != corev1.SeccompProfileTypeLocalhost || sp.LocalhostProfile == nil || *sp.LocalhostProfile != seccompPath {
		t.Errorf("seccomp profile %+v, want Localhost %q", sp, seccompPath)
	}
	if ap := psc.AppArmorProfile; ap == nil || ap.Type != corev1.AppArmorProfileTypeLocalhost || ap.LocalhostProfile == nil || *ap.LocalhostProfile != apparmorName {
		t.Errorf("AppArmor profile %+v, want Localhost %q", ap, apparmorName)
	}
	for _, v := range spec.Volumes {
		if v.HostPath != nil {
			t.Errorf("volume %q is a hostPath", v.Name)
		}
	}
	all := slices.Concat(spec.InitContainers, spec.Containers)
	if len(spec.InitContainers) != 1 || len(spec.Containers) != 1 {
		t.Fatalf("want one init container (doctor) and one container, have %d and %d", len(spec.InitContainers), len(spec.Containers))
	}
	for _, c := range all {
		sc := c.SecurityContext
		if sc == nil {
			t.Fatalf("container %q has no security context", c.Name)
		}
		if sc.Privileged == nil || *sc.Privileged {
			t.Errorf("%s: privileged = %v, want an explicit false", c.Name, sc.Privileged)
		}
		if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
			t.Errorf("%s: allowPrivilegeEscalation = %v, want false (no_new_privs)", c.Name, sc.AllowPrivilegeEscalation)
		}
		if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
			t.Errorf("%s: readOnlyRootFilesystem not set", c.Name)
		}
		if sc.ProcMount == nil || *sc.ProcMount != corev1.UnmaskedProcMount {
			t.Errorf("%s: procMount = %v, want Unmasked: jails mount their own /proc", c.Name, sc.ProcMount)
		}
		if sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
			t.Errorf("%s: capabilities drop %v, want [ALL]", c.Name, sc.Capabilities)
			continue
		}
		var add []string
		for _, c := range sc.Capabilities.Add {
			add = append(add, strings.TrimPrefix(string(c), "CAP_"))
		}
		slices.Sort(add)
		if got := strings.Join(add, ","); got != wantCaps {
			t.Errorf("%s: capabilities add %s, want exactly %s", c.Name, got, wantCaps)
		}
		if sc.RunAsNonRoot != nil && *sc.RunAsNonRoot {
			t.Errorf("%s: runAsNonRoot: pyjail must be root in its user namespace", c.Name)
		}
		if sc.SeccompProfile != nil || sc.AppArmorProfile != nil || sc.SELinuxOptions != nil {
			t.Errorf("%s: overrides the pod's seccomp, AppArmor or SELinux settings", c.Name)
		}
		for _, p := range c.Ports {
			if p.HostPort != 0 {
				t.Errorf("%s: host port %d", c.Name, p.HostPort)
			}
		}
	}
	// The doctor must see what the server will get.
	if got, want := spec.InitContainers[0].SecurityContext, spec.Containers[0].SecurityContext; !equalJSON(t, got, want) {
		t.Errorf("doctor's security context %+v differs from the server's %+v", got, want)
	}
	if got, want := spec.InitContainers[0].Image, spec.Containers[0].Image; got != want {
		t.Errorf("doctor runs image %q, the server %q", got, want)
	}
}

// TestAPIServerRules repeats the API server's own validation rules that the
// security context touches (pkg/apis/core/validation), so a pod the
// manifests describe is one the API server accepts.
func TestAPIServerRules(t *testing.T) {
	spec := baseDeployment(t).Spec.Template.Spec
	userns := spec.HostUsers != nil && !*spec.HostUsers
	for _, c := range slices.Concat(spec.InitContainers, spec.Containers) {
		sc := c.SecurityContext
		if sc.ProcMount != nil && *sc.ProcMount == corev1.UnmaskedProcMount && !userns {
			t.Errorf("%s: procMount Unmasked is rejected unless hostUsers is false", c.Name)
		}
		if sc.AllowPrivilegeEscalation != nil && !*sc.AllowPrivilegeEscalation {
			if sc.Privileged != nil && *sc.Privileged {
				t.Errorf("%s: allowPrivilegeEscalation false with privileged true is rejected", c.Name)
			}
			for _, c2 := range sc.Capabilities.Add {
				if strings.TrimPrefix(string(c2), "CAP_") == "SYS_ADMIN" {
					t.Errorf("%s: allowPrivilegeEscalation false with CAP_SYS_ADMIN is rejected", c.Name)
				}
			}
		}
	}
	if userns {
		for _, v := range spec.Volumes {
			if v.HostPath != nil {
				t.Errorf("volume %q: hostPath volumes are refused for user-namespaced pods", v.Name)
			}
		}
	}
}

// TestPodSecurityBaseline checks the Pod Security "baseline" rules the pod
// could break (k8s.io/pod-security-admission, policy version 1.35+), so it
// runs in the example's namespace, which enforces baseline. The evaluator
// itself is not imported: its module brings in the API server and
// client-go.
func TestPodSecurityBaseline(t *testing.T) {
	baselineCaps := []string{
		"AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD",
		"NET_BIND_SERVICE", "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT",
	}
	spec := baseDeployment(t).Spec.Template.Spec
	userns := spec.HostUsers != nil && !*spec.HostUsers
	if sp := spec.SecurityContext.SeccompProfile; sp != nil && sp.Type == corev1.SeccompProfileTypeUnconfined {
		t.Error("baseline forbids an Unconfined seccomp profile")
	}
	if ap := spec.SecurityContext.AppArmorProfile; ap != nil && ap.Type == corev1.AppArmorProfileTypeUnconfined {
		t.Error("baseline forbids an Unconfined AppArmor profile")
	}
	for _, c := range slices.Concat(spec.InitContainers, spec.Containers) {
		sc := c.SecurityContext
		if sc.Privileged != nil && *sc.Privileged {
			t.Errorf("%s: baseline forbids privileged", c.Name)
		}
		if sc.ProcMount != nil && *sc.ProcMount != corev1.DefaultProcMount && !userns {
			t.Errorf("%s: baseline allows procMount %s only for user-namespaced pods", c.Name, *sc.ProcMount)
		}
		for _, cp := range sc.Capabilities.Add {
			if !slices.Contains(baselineCaps, strings.TrimPrefix(string(cp), "CAP_")) {
				t.Errorf("%s: capability %s is outside baseline's list", c.Name, cp)
			}
		}
	}
	ns := find[*corev1.Namespace](t, loadTree(t, exampleDir).objects, "pyjail")
	if got := ns.Labels["pod-security.kubernetes.io/enforce"]; got != "baseline" {
		t.Errorf("namespace enforces %q, want baseline", got)
	}
}

// TestProbesAndPorts checks the probes hit the metrics listener's
// /readyz and /healthz, and that the flags, ports and mounts agree.
func TestProbesAndPorts(t *testing.T) {
	d := baseDeployment(t)
	c := d.Spec.Template.Spec.Containers[0]
	ports := map[string]int32{}
	for _, p := range c.Ports {
		ports[p.Name] = p.ContainerPort
	}
	for name, tc := range map[string]struct {
		probe *corev1.Probe
		path  string
	}{
		"startup":   {c.StartupProbe, "/readyz"},
		"readiness": {c.ReadinessProbe, "/readyz"},
		"liveness":  {c.LivenessProbe, "/healthz"},
	} {
		t.Run(name, func(t *testing.T) {
			if tc.probe == nil || tc.probe.HTTPGet == nil {
				t.Fatalf("no HTTP %s probe", name)
			}
			h := tc.probe.HTTPGet
			if h.Path != tc.path || h.Port != intstr.FromString("metrics") {
				t.Errorf("probe %s on port %s, want %s on port metrics", h.Path, h.Port.String(), tc.path)
			}
		})
	}
	flags := argFlags(t, c.Args)
	if got, want := flags["--metrics"], ":"+itoa(ports["metrics"]); got != want {
		t.Errorf("--metrics=%s, want %s (the metrics port)", got, want)
	}
	if got, want := flags["--http"], ":"+itoa(ports["http"]); got != want {
		t.Errorf("--http=%s, want %s (the http port)", got, want)
	}
	if _, ok := flags["--insecure-behind-proxy"]; !ok {
		t.Error("no --insecure-behind-proxy: a non-loopback listener without TLS is refused")
	}
	if c.Lifecycle == nil || c.Lifecycle.PreStop == nil || c.Lifecycle.PreStop.Sleep == nil {
		t.Error("no preStop sleep: SIGTERM would race the endpoint removal")
	}
	grace := *d.Spec.Template.Spec.TerminationGracePeriodSeconds
	if grace < 5+60+10 {
		t.Errorf("terminationGracePeriodSeconds %d is shorter than preStop + the longest run (60 s) + teardown", grace)
	}
	mounts := map[string]corev1.VolumeMount{}
	for _, m := range c.VolumeMounts {
		mounts[m.Name] = m
	}
	for flag, vol := range map[string]string{"--config": "config", "--tokens": "tokens", "--data-dir": "data"} {
		if m, ok := mounts[vol]; !ok || !strings.HasPrefix(flags[flag], m.MountPath) {
			t.Errorf("%s=%s is not in the %q volume (mounted at %q)", flag, flags[flag], vol, m.MountPath)
		}
	}
	if d.Spec.Replicas != nil {
		t.Error("the Deployment sets replicas; the HPA owns the count and apply would reset it")
	}
	if s := d.Spec.Strategy.RollingUpdate; s == nil || s.MaxUnavailable.IntValue() != 0 || s.MaxSurge.IntValue() < 1 {
		t.Errorf("rolling update %+v: want maxUnavailable 0 and a surge, so capacity never drops", s)
	}
}

// TestTokensSecret checks the tokens file comes from a read-only Secret
// volume whose name stays put when tokens change (so pyjail reloads it
// instead of every pod restarting).
func TestTokensSecret(t *testing.T) {
	d := baseDeployment(t)
	spec := d.Spec.Template.Spec
	var vol *corev1.Volume
	for i := range spec.Volumes {
		if spec.Volumes[i].Name == "tokens" {
			vol = &spec.Volumes[i]
		}
	}
	if vol == nil || vol.Secret == nil || vol.Secret.SecretName != "pyjail-tokens" {
		t.Fatalf("tokens volume %+v, want Secret pyjail-tokens", vol)
	}
	if m := vol.Secret.DefaultMode; m == nil || *m&0o077 != 0 {
		t.Errorf("tokens file mode %v: readable beyond its owner", m)
	}
	for _, c := range slices.Concat(spec.InitContainers, spec.Containers) {
		for _, m := range c.VolumeMounts {
			if m.Name != "tokens" {
				continue
			}
			if !m.ReadOnly {
				t.Errorf("%s: tokens mounted read-write", c.Name)
			}
			if m.SubPath != "" || m.SubPathExpr != "" {
				t.Errorf("%s: tokens mounted with subPath, which never sees Secret updates", c.Name)
			}
		}
	}
	tokensFile := filepath.Base(argFlags(t, spec.Containers[0].Args)["--tokens"])
	var gen *generator
	for _, g := range loadTree(t, exampleDir).generators {
		if g.Name == "pyjail-tokens" {
			gen = &g
		}
	}
	if gen == nil {
		t.Fatal("the example overlay generates no pyjail-tokens Secret")
	}
	if gen.Options == nil || !gen.Options.DisableNameSuffixHash {
		t.Error("pyjail-tokens gets a hash suffix: every token change would restart every pod and end its sessions")
	}
	if !slices.Contains(gen.Files, tokensFile) {
		t.Errorf("pyjail-tokens has files %v, want key %q that --tokens reads", gen.Files, tokensFile)
	}
}

// TestResources checks every container has requests and limits, and that
// the server's limits hold the worst case pyjail's own configuration
// allows (so a pod-level OOM kill, which takes the whole container, cannot
// happen before a jail's own limit).
func TestResources(t *testing.T) {
	d := baseDeployment(t)
	spec := d.Spec.Template.Spec
	for _, c := range slices.Concat(spec.InitContainers, spec.Containers) {
		for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
			req, okReq := c.Resources.Requests[r]
			lim, okLim := c.Resources.Limits[r]
			if !okReq || !okLim {
				t.Errorf("%s: %s request or limit missing", c.Name, r)
				continue
			}
			if req.Cmp(lim) > 0 {
				t.Errorf("%s: %s request %s above limit %s", c.Name, r, req.String(), lim.String())
			}
		}
	}
	cfg := loadConfig(t)
	var budgets, jailMem int64
	var jailCPU float64
	for _, p := range cfg.Profiles {
		if p.Warm.Size > 0 {
			budgets += p.Warm.MemoryBudgetBytes
		}
		jailMem = max(jailMem, p.Limits.MemoryBytes)
		jailCPU = max(jailCPU, p.Limits.CPUs)
	}
	var stateTmpfs int64
	for _, v := range spec.Volumes {
		if v.EmptyDir != nil && v.EmptyDir.Medium == corev1.StorageMediumMemory && v.EmptyDir.SizeLimit != nil {
			stateTmpfs += v.EmptyDir.SizeLimit.Value()
		}
	}
	worst := serverRSS + budgets + int64(cfg.MaxConcurrent)*jailMem + stateTmpfs
	lim := spec.Containers[0].Resources.Limits
	if got := lim.Memory().Value(); got < worst {
		t.Errorf("memory limit %d MiB below the worst case of %d MiB", got/MiB, worst/MiB)
	}
	if got, want := lim.Cpu().MilliValue(), int64(float64(cfg.MaxConcurrent)*jailCPU*1000); got < want {
		t.Errorf("CPU limit %dm below max_concurrent x jail CPUs = %dm", got, want)
	}
	init := spec.InitContainers[0].Resources.Limits.Memory().Value()
	if init < serverRSS+jailMem {
		t.Errorf("doctor's memory limit %d MiB cannot hold one cold jail of %d MiB", init/MiB, jailMem/MiB)
	}
}

// TestConfigFitsThePodsUserNamespace validates config.json as the server
// does and checks the jails' id range lies inside the 65536 ids a pod's
// user namespace maps: ids outside it cannot be mapped at all, id 0 is
// pyjail itself, and 65534 is how the pod sees unmapped owners.
func TestConfigFitsThePodsUserNamespace(t *testing.T) {
	cfg := loadConfig(t)
	m := cfg.IDMap
	if m.HostID == 0 {
		t.Error("id_map.host_id 0 would map a jail's root onto pyjail's own uid")
	}
	if end := uint64(m.HostID) + uint64(m.Size); end > 65534 {
		t.Errorf("jail ids %d-%d reach past 65533, outside what the pod's user namespace maps well", m.HostID, end-1)
	}
	d := baseDeployment(t)
	for _, vm := range d.Spec.Template.Spec.Containers[0].VolumeMounts {
		if vm.Name == "state" && vm.MountPath != cfg.StateDir {
			t.Errorf("state volume at %q, config's state_dir %q", vm.MountPath, cfg.StateDir)
		}
	}
}

func loadConfig(t *testing.T) policy.Config {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(baseDir, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := policy.Load(b)
	if err != nil {
		t.Fatalf("config.json: %v", err)
	}
	return cfg
}

// TestTargets checks the PDB, HPA, Services, ServiceMonitor, Ingress and
// patches all point at objects and ports that exist.
func TestTargets(t *testing.T) {
	tr := loadTree(t, exampleDir)
	d := find[*appsv1.Deployment](t, tr.objects, "pyjail")
	podLabels := labels.Set(d.Spec.Template.Labels)
	sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	if err != nil || !sel.Matches(podLabels) {
		t.Fatalf("the Deployment's selector does not match its pods: %v", err)
	}
	matchesPods := func(what string, s *metav1.LabelSelector) {
		t.Helper()
		sel, err := metav1.LabelSelectorAsSelector(s)
		if err != nil || sel.Empty() || !sel.Matches(podLabels) {
			t.Errorf("%s does not select the pyjail pods (%v)", what, err)
		}
	}
	matchesPods("the PDB", find[*policyv1.PodDisruptionBudget](t, tr.objects, "pyjail").Spec.Selector)

	hpa := find[*autoscalingv2.HorizontalPodAutoscaler](t, tr.objects, "pyjail")
	if r := hpa.Spec.ScaleTargetRef; r.APIVersion != "apps/v1" || r.Kind != "Deployment" || r.Name != d.Name {
		t.Errorf("HPA scales %+v, want the pyjail Deployment", r)
	}
	if hpa.Spec.MinReplicas == nil || *hpa.Spec.MinReplicas < 2 {
		t.Error("HPA may scale to one replica: its drain would leave none serving")
	}
	if !hasCPUMetric(hpa.Spec.Metrics) {
		t.Error("HPA does not scale on CPU")
	}

	containerPorts := map[string]bool{}
	for _, p := range d.Spec.Template.Spec.Containers[0].Ports {
		containerPorts[p.Name] = true
	}
	services := map[string]*corev1.Service{}
	for _, m := range tr.objects {
		if s, ok := m.obj.(*corev1.Service); ok {
			services[s.Name] = s
			if !labels.SelectorFromSet(s.Spec.Selector).Matches(podLabels) || len(s.Spec.Selector) == 0 {
				t.Errorf("Service %s does not select the pyjail pods", s.Name)
			}
			for _, p := range s.Spec.Ports {
				if !containerPorts[p.TargetPort.String()] {
					t.Errorf("Service %s targets port %s, which the container does not name", s.Name, p.TargetPort.String())
				}
			}
		}
	}
	if s := services["pyjail"]; s == nil || s.Spec.SessionAffinity != corev1.ServiceAffinityClientIP {
		t.Error("the pyjail Service has no ClientIP affinity for direct in-cluster clients")
	}

	sm := find[*serviceMonitor](t, tr.objects, "pyjail")
	smSel, err := metav1.LabelSelectorAsSelector(&sm.Spec.Selector)
	if err != nil {
		t.Fatal(err)
	}
	var scraped []*corev1.Service
	for _, s := range services {
		if smSel.Matches(labels.Set(s.Labels)) {
			scraped = append(scraped, s)
		}
	}
	if len(scraped) != 1 || scraped[0].Name != "pyjail-metrics" {
		t.Fatalf("the ServiceMonitor selects %d Services, want pyjail-metrics alone", len(scraped))
	}
	for _, e := range sm.Spec.Endpoints {
		if e.Path != "/metrics" || !slices.ContainsFunc(scraped[0].Spec.Ports, func(p corev1.ServicePort) bool { return p.Name == e.Port }) {
			t.Errorf("ServiceMonitor endpoint %+v: want /metrics on a port of pyjail-metrics", e)
		}
	}

	ing := find[*networkingv1.Ingress](t, tr.objects, "pyjail")
	for _, r := range ing.Spec.Rules {
		for _, p := range r.HTTP.Paths {
			b := p.Backend.Service
			if s := services[b.Name]; s == nil || !slices.ContainsFunc(s.Spec.Ports, func(sp corev1.ServicePort) bool { return sp.Name == b.Port.Name }) {
				t.Errorf("Ingress backend %s:%s does not exist", b.Name, b.Port.Name)
			}
		}
	}
	if got := ing.Annotations["nginx.ingress.kubernetes.io/upstream-hash-by"]; got != "$http_authorization" {
		t.Errorf("ingress-nginx hashes on %q; see README.md, Session affinity, for why the bearer token", got)
	}
	if len(ing.Spec.TLS) == 0 {
		t.Error("the Ingress does not terminate TLS, and the pods serve without it")
	}

	np := find[*networkingv1.NetworkPolicy](t, tr.objects, "pyjail")
	matchesPods("the NetworkPolicy", &np.Spec.PodSelector)
	if !slices.Contains(np.Spec.PolicyTypes, networkingv1.PolicyTypeEgress) || len(np.Spec.Egress) != 0 {
		t.Error("the NetworkPolicy allows egress; pyjail needs none")
	}

	rc := find[*nodev1.RuntimeClass](t, tr.objects, "pyjail")
	if d.Spec.Template.Spec.RuntimeClassName == nil || *d.Spec.Template.Spec.RuntimeClassName != rc.Name {
		t.Error("the pods do not use the pyjail RuntimeClass")
	}
	if rc.Scheduling == nil || len(rc.Scheduling.NodeSelector) == 0 {
		t.Error("the RuntimeClass does not keep pods on prepared nodes")
	}

	for _, p := range tr.patches {
		checkPatchTarget(t, p, tr.objects)
	}
	// The optional component patches the base HPA and keeps CPU.
	comp := loadTree(t, "components/hpa-runs-in-flight")
	if len(comp.patches) != 1 {
		t.Fatalf("hpa-runs-in-flight has %d patches, want 1", len(comp.patches))
	}
	checkPatchTarget(t, comp.patches[0], loadTree(t, baseDir).objects)
	ph := comp.patches[0].obj.(*autoscalingv2.HorizontalPodAutoscaler)
	if !hasCPUMetric(ph.Spec.Metrics) || !slices.ContainsFunc(ph.Spec.Metrics, func(m autoscalingv2.MetricSpec) bool {
		return m.Pods != nil && m.Pods.Metric.Name == "pyjail_runs_in_flight"
	}) {
		t.Error("the hpa-runs-in-flight patch must keep CPU and add pyjail_runs_in_flight")
	}
}

func hasCPUMetric(ms []autoscalingv2.MetricSpec) bool {
	return slices.ContainsFunc(ms, func(m autoscalingv2.MetricSpec) bool {
		return m.Resource != nil && m.Resource.Name == corev1.ResourceCPU
	})
}

// checkPatchTarget requires a strategic-merge patch to name an object of
// its own kind that exists in objs.
func checkPatchTarget(t *testing.T, p manifest, objs []manifest) {
	t.Helper()
	name := objectName(p.obj)
	if !slices.ContainsFunc(objs, func(m manifest) bool {
		return kindOf(m.obj) == kindOf(p.obj) && objectName(m.obj) == name
	}) {
		t.Errorf("%s patches %s %q, which does not exist", p.path, kindOf(p.obj), name)
	}
}

// argFlags parses --name=value and bare --name arguments.
func argFlags(t *testing.T, args []string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, a := range args {
		if !strings.HasPrefix(a, "--") {
			continue
		}
		k, v, _ := strings.Cut(a, "=")
		out[k] = v
	}
	return out
}

func itoa(n int32) string { return strconv.Itoa(int(n)) }
