package kubernetes

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	nodev1 "k8s.io/api/node/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// The kustomize trees the tests read. Every YAML file under them is either
// a kustomization or a manifest of a kind newObject knows.
var kustomizeDirs = []string{"base", "components", "overlays"}

// newObject returns a fresh value of the Go type the API server decodes
// apiVersion/kind into. A manifest of any other kind fails the tests, so
// every manifest is checked strictly.
func newObject(apiVersion, kind string) (any, bool) {
	switch apiVersion + " " + kind {
	case "apps/v1 Deployment":
		return &appsv1.Deployment{}, true
	case "v1 Service":
		return &corev1.Service{}, true
	case "v1 ServiceAccount":
		return &corev1.ServiceAccount{}, true
	case "v1 PersistentVolumeClaim":
		return &corev1.PersistentVolumeClaim{}, true
	case "v1 Namespace":
		return &corev1.Namespace{}, true
	case "v1 Secret":
		return &corev1.Secret{}, true
	case "v1 ConfigMap":
		return &corev1.ConfigMap{}, true
	case "policy/v1 PodDisruptionBudget":
		return &policyv1.PodDisruptionBudget{}, true
	case "autoscaling/v2 HorizontalPodAutoscaler":
		return &autoscalingv2.HorizontalPodAutoscaler{}, true
	case "networking.k8s.io/v1 Ingress":
		return &networkingv1.Ingress{}, true
	case "networking.k8s.io/v1 NetworkPolicy":
		return &networkingv1.NetworkPolicy{}, true
	case "node.k8s.io/v1 RuntimeClass":
		return &nodev1.RuntimeClass{}, true
	case "monitoring.coreos.com/v1 ServiceMonitor":
		return &serviceMonitor{}, true
	}
	return nil, false
}

// serviceMonitor is the part of the Prometheus Operator's
// monitoring.coreos.com/v1 ServiceMonitor that the manifests use, with the
// operator's JSON names (pkg/apis/monitoring/v1, v0.95). Its Go module
// brings controller-runtime and apiextensions along, so the tests mirror
// the fields instead; strict decoding still fails on any field not here.
type serviceMonitor struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              struct {
		JobLabel          string               `json:"jobLabel,omitempty"`
		Selector          metav1.LabelSelector `json:"selector"`
		NamespaceSelector *struct {
			Any        bool     `json:"any,omitempty"`
			MatchNames []string `json:"matchNames,omitempty"`
		} `json:"namespaceSelector,omitempty"`
		Endpoints []struct {
			Port          string `json:"port,omitempty"`
			Path          string `json:"path,omitempty"`
			Scheme        string `json:"scheme,omitempty"`
			Interval      string `json:"interval,omitempty"`
			ScrapeTimeout string `json:"scrapeTimeout,omitempty"`
		} `json:"endpoints"`
	} `json:"spec"`
}

// kustomization is the part of kustomize's Kustomization and Component
// (kustomize.config.k8s.io, api/types) that the manifests use, with
// kustomize's JSON names; strict decoding fails on anything else, so a
// misspelt key cannot be silently ignored here while kustomize rejects it.
type kustomization struct {
	APIVersion         string      `json:"apiVersion"`
	Kind               string      `json:"kind"`
	Namespace          string      `json:"namespace,omitempty"`
	Resources          []string    `json:"resources,omitempty"`
	Components         []string    `json:"components,omitempty"`
	Labels             []kLabel    `json:"labels,omitempty"`
	Images             []kImage    `json:"images,omitempty"`
	Patches            []kPatch    `json:"patches,omitempty"`
	ConfigMapGenerator []generator `json:"configMapGenerator,omitempty"`
	SecretGenerator    []generator `json:"secretGenerator,omitempty"`
}

type kLabel struct {
	Pairs            map[string]string `json:"pairs"`
	IncludeSelectors bool              `json:"includeSelectors,omitempty"`
	IncludeTemplates bool              `json:"includeTemplates,omitempty"`
}

type kImage struct {
	Name    string `json:"name"`
	NewName string `json:"newName,omitempty"`
	NewTag  string `json:"newTag,omitempty"`
	Digest  string `json:"digest,omitempty"`
}

type kPatch struct {
	Path   string `json:"path,omitempty"`
	Patch  string `json:"patch,omitempty"`
	Target *struct {
		Group   string `json:"group,omitempty"`
		Version string `json:"version,omitempty"`
		Kind    string `json:"kind,omitempty"`
		Name    string `json:"name,omitempty"`
	} `json:"target,omitempty"`
}

type generator struct {
	Name     string   `json:"name"`
	Behavior string   `json:"behavior,omitempty"`
	Type     string   `json:"type,omitempty"`
	Files    []string `json:"files,omitempty"`
	Literals []string `json:"literals,omitempty"`
	Options  *struct {
		DisableNameSuffixHash bool `json:"disableNameSuffixHash,omitempty"`
	} `json:"options,omitempty"`
}

// manifest is one decoded object and the file it came from.
type manifest struct {
	path string
	obj  any
}

// decodeFile decodes every document of a YAML file strictly: unknown and
// duplicate fields are errors. Kustomization files decode into
// kustomization, everything else into its API type.
func decodeFile(t *testing.T, path string) []manifest {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []manifest
	for i, doc := range bytes.Split(b, []byte("\n---\n")) {
		if len(bytes.TrimSpace(stripComments(doc))) == 0 {
			continue
		}
		var tm metav1.TypeMeta
		if err := yaml.Unmarshal(doc, &tm); err != nil {
			t.Fatalf("%s: document %d: %v", path, i, err)
		}
		var obj any
		switch {
		case strings.HasPrefix(tm.APIVersion, "kustomize.config.k8s.io/"):
			obj = &kustomization{}
		default:
			var ok bool
			if obj, ok = newObject(tm.APIVersion, tm.Kind); !ok {
				t.Fatalf("%s: document %d: no API type for %s %s; add it to newObject", path, i, tm.APIVersion, tm.Kind)
			}
		}
		if err := yaml.UnmarshalStrict(doc, obj); err != nil {
			t.Fatalf("%s: document %d (%s): %v", path, i, tm.Kind, err)
		}
		out = append(out, manifest{path: path, obj: obj})
	}
	return out
}

func stripComments(doc []byte) []byte {
	var keep [][]byte
	for l := range bytes.Lines(doc) {
		if !bytes.HasPrefix(bytes.TrimSpace(l), []byte("#")) {
			keep = append(keep, l)
		}
	}
	return bytes.Join(keep, nil)
}

// tree is what one kustomization brings together: its objects, those of
// the kustomizations and components it includes, and what it patches and
// generates. It does not apply patches; tests check each patch's target
// exists.
type tree struct {
	objects    []manifest
	patches    []manifest
	generators []generator
	kust       map[string]*kustomization // by directory
}

// loadTree reads the kustomization in dir and, recursively, everything it
// includes. Every referenced file must exist.
func loadTree(t *testing.T, dir string) *tree {
	t.Helper()
	tr := &tree{kust: map[string]*kustomization{}}
	tr.load(t, filepath.Clean(dir))
	return tr
}

func (tr *tree) load(t *testing.T, dir string) {
	t.Helper()
	if _, done := tr.kust[dir]; done {
		return
	}
	ms := decodeFile(t, filepath.Join(dir, "kustomization.yaml"))
	if len(ms) != 1 {
		t.Fatalf("%s: want one kustomization document, have %d", dir, len(ms))
	}
	k := ms[0].obj.(*kustomization)
	tr.kust[dir] = k
	for _, r := range append(slices.Clone(k.Resources), k.Components...) {
		p := filepath.Join(dir, r)
		st, err := os.Stat(p)
		if err != nil {
			t.Fatalf("%s: resource %q: %v", dir, r, err)
		}
		if st.IsDir() {
			tr.load(t, p)
			continue
		}
		tr.objects = append(tr.objects, decodeFile(t, p)...)
	}
	for _, p := range k.Patches {
		if p.Path == "" {
			t.Fatalf("%s: inline patches are not checked; put the patch in a file", dir)
		}
		tr.patches = append(tr.patches, decodeFile(t, filepath.Join(dir, p.Path))...)
	}
	for _, g := range append(slices.Clone(k.ConfigMapGenerator), k.SecretGenerator...) {
		for _, f := range g.Files {
			_, file, _ := strings.Cut(f, "=")
			if file == "" {
				file = f
			}
			if _, err := os.Stat(filepath.Join(dir, file)); err != nil {
				t.Fatalf("%s: generator %q: %v", dir, g.Name, err)
			}
		}
		tr.generators = append(tr.generators, g)
	}
}

// find returns the one object of type T named name.
func find[T any](t *testing.T, objs []manifest, name string) T {
	t.Helper()
	var found []T
	for _, m := range objs {
		if o, ok := m.obj.(T); ok && objectName(m.obj) == name {
			found = append(found, o)
		}
	}
	if len(found) != 1 {
		var zero T
		t.Fatalf("want one %T named %q, have %d", zero, name, len(found))
	}
	return found[0]
}

func objectName(o any) string {
	if m, ok := o.(metav1.Object); ok {
		return m.GetName()
	}
	return ""
}

func kindOf(o any) string { return fmt.Sprintf("%T", o) }

// equalJSON compares two values by their JSON encoding.
func equalJSON(t *testing.T, a, b any) bool {
	t.Helper()
	ja, err := json.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	jb, err := json.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	return bytes.Equal(ja, jb)
}
