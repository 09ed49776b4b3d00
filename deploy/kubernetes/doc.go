// Package kubernetes is pyjail's Kubernetes deployment: kustomize manifests
// (base, components, overlays) and the node-side files a pyjail node needs
// (node/: the seccomp and AppArmor profiles and the runtime handlers). It
// holds no code. Its tests decode every manifest strictly into the
// Kubernetes API types and check the pod's security settings against what
// the jail needs, so that the manifests cannot drift from the server.
//
// It is a module of its own so that k8s.io/api and its dependencies never
// enter the server's module graph; `make test-kubernetes` runs its tests.
package kubernetes
