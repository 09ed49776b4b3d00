# pyjail needs cgo (libcontainer's nsenter) and the seccomp tag in every
# build: a binary without it refuses to run code.
GO        ?= go
TAGS      := seccomp
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS   := -s -w -X main.version=$(VERSION)
export CGO_ENABLED := 1

.PHONY: image image-play build test test-kubernetes e2e scaleout lint lint-full bench clean rootfs vm-test

build:
	$(GO) build -tags $(TAGS) -trimpath -ldflags "$(LDFLAGS)" -o bin/pyjail ./cmd/pyjail

ROOTFS ?= /var/lib/pyjail/rootfs

# The whole suite: unit tests, the policy package without cgo, the
# root-only integration tests (on the host rootfs; their isolation and
# rootfs checks again on the built Debian rootfs; and the isolation,
# limit, escape and leak tests once more with every calc and full jail
# forked from a fork server) and the end-to-end MCP client tests.
FORK_SERVER_TESTS := Identity|Network|Processes|Filesystem|Seccomp|Memory|Pids|Timeout|Output|Scientific|Escape|ManyRuns|ConcurrentRuns|Cancellation
test: build lint rootfs
	CGO_ENABLED=0 $(GO) test -count=1 ./policy/...
	PYJAIL_TEST_DEBIAN_ROOTFS=$(ROOTFS) $(GO) test -tags $(TAGS) -count=1 -timeout 30m ./...
	PYJAIL_TEST_ROOTFS=$(ROOTFS) $(GO) test -tags $(TAGS) -count=1 -timeout 10m \
		-run 'Identity|Network|Processes|Filesystem|Seccomp|Memory|Pids|Scientific|EscapeCorpusPythonLayer' ./test/
	PYJAIL_TEST_FORK_SERVER=1 PYJAIL_TEST_ROOTFS=$(ROOTFS) $(GO) test -tags $(TAGS) -count=1 -timeout 15m \
		-run '$(FORK_SERVER_TESTS)' ./test/
	$(MAKE) test-kubernetes
	$(MAKE) e2e
	$(MAKE) scaleout

# The Kubernetes manifests (deploy/kubernetes): decoded strictly into the
# API types and checked against the jail's needs. A module of its own, so
# that k8s.io/api stays out of the server's module graph; it needs neither
# root nor cgo.
test-kubernetes:
	cd deploy/kubernetes && CGO_ENABLED=0 $(GO) vet ./... && CGO_ENABLED=0 $(GO) test -count=1 ./...

# The root-only tests again in a Debian 12 VM on pure cgroup v2 under qemu
# (test/vm/README.md): isolation, limits and leaks, then the same against
# forked jails, each pass a systemd service with Delegate=yes whose jails'
# cgroups live in its delegated subtree. The guest image is cached by
# content; VM_TIMEOUT bounds boot to power-off, VM_BUILD_TIMEOUT a cold
# image build. Needs qemu-system-x86 and linux-image-amd64
# (scripts/setup.sh --vm).
# The root pass adds what differs on v2 beyond one jail: the fork
# servers' and pools' per-jail cgroups, the sweep after a killed server,
# the v2 probe. The fork-server pass runs the escape corpus with the
# Python layer off only: the Python layer does not depend on the cgroup
# version, and its cold containers importing pandas eight at a time take
# longer than their 20 s under emulation.
# TestKilledServerAtEachStage stays on the host (make test): it restarts
# a server up to 40 times per stage to pin runc's init at its exec fifo,
# minutes under emulation; the VM keeps TestKilledServerLeavesNoJail.
VM_ROOT_TESTS ?= Identity|Network|Processes|Filesystem|Seccomp|Memory|Pids|CPU|Timeout|Output|ManyRuns|ConcurrentRuns|Cancellation|KilledServerLeaves|CgroupV2|ForkServer|Pool
VM_FORK_TESTS ?= Identity|Network|Processes|Filesystem|Seccomp|Memory|Pids|CPU|Timeout|Output|Scientific|EscapeCorpusKernelOnly|ManyRuns|ConcurrentRuns|Cancellation
VM_MANY_RUNS  ?= 25
# The rootless pass: the root pass's tests as the unprivileged user pyjail
# (made by test/vm/hooks/pre-rootless, with subordinate ids), which start
# again in a user namespace of their own as `pyjail serve` does
# (jail/rootless). /run/pyjail-rootless is its state; the user may not
# create entries in /run.
VM_ROOTLESS_TESTS ?= $(VM_ROOT_TESTS)
VM_ROOTLESS_PROPS ?= -p User=pyjail -p Group=pyjail -p RuntimeDirectory=pyjail-rootless
# Boot to power-off: three passes of 6-10 min each under TCG (CI measured
# 28 min in all with 50 runs of the many-runs tests, 25 now), both units'
# service checks, the desktop user's and the pod's, and room for a slow host.
VM_TIMEOUT ?= 2400
# Each pass's -test.timeout: the rootless pass took 10 min on a busy host.
VM_TEST_TIMEOUT ?= 15m
vm-test: build rootfs
	$(GO) test -c -tags $(TAGS) -o bin/integration.test ./test/
	VM_PASSES='root forkserver rootless' VM_HOOKS=test/vm/hooks \
	VM_RUN_root='$(VM_ROOT_TESTS)' VM_ENV_root='PYJAIL_TEST_MANY_RUNS=$(VM_MANY_RUNS)' \
	VM_RUN_forkserver='$(VM_FORK_TESTS)' VM_ENV_forkserver='PYJAIL_TEST_FORK_SERVER=1 PYJAIL_TEST_MANY_RUNS=$(VM_MANY_RUNS)' \
	VM_RUN_rootless='$(VM_ROOTLESS_TESTS)' VM_PROPS_rootless='$(VM_ROOTLESS_PROPS)' \
	VM_ENV_rootless='PYJAIL_TEST_ROOTLESS=1 PYJAIL_TEST_RUN_DIR=/run/pyjail-rootless PYJAIL_TEST_MANY_RUNS=$(VM_MANY_RUNS)' \
	VM_TIMEOUT=$(VM_TIMEOUT) VM_TEST_TIMEOUT=$(VM_TEST_TIMEOUT) VM_ROOTFS=$(ROOTFS) bash test/vm/run.sh

# The OCI image (image/, cmd/pyjail-image): a minimal Debian base from
# mmdebstrap (scripts/image-base.sh, cached by its recipe), the binary and
# the built rootfs at /var/lib/pyjail/rootfs, assembled with
# go-containerregistry, no daemon. SOURCE_DATE_EPOCH (default: the last
# commit's time) fixes every timestamp: the same inputs, the same digest.
# Writes bin/image/oci (OCI layout), bin/image/pyjail.oci.tar (oci-archive),
# bin/image/digest and bin/image/packages.txt.
IMAGE_OUT         ?= bin/image
# Where the mmdebstrap base tar is kept (CI: /var/cache/pyjail/image).
IMAGE_BASE_DIR    ?= $(IMAGE_OUT)
IMAGE_SOURCE      ?= https://github.com/pyjail/pyjail
SOURCE_DATE_EPOCH ?= $(shell git log -1 --format=%ct 2>/dev/null || echo 0)
export SOURCE_DATE_EPOCH
image: build rootfs
	./bin/pyjail rootfs verify --dir $(ROOTFS) >/dev/null
	$(GO) build -trimpath -o bin/pyjail-image ./cmd/pyjail-image
	mkdir -p $(IMAGE_OUT)
	./bin/pyjail-image -base "$$(bash scripts/image-base.sh $(IMAGE_BASE_DIR))" -binary bin/pyjail \
		-rootfs $(ROOTFS) -out $(IMAGE_OUT) -cache $(IMAGE_OUT)/cache -source $(IMAGE_SOURCE) \
		-revision "$$(git rev-parse HEAD)" -version $(VERSION) > $(IMAGE_OUT)/build.txt
	@tail -n 1 $(IMAGE_OUT)/build.txt

# Build (or confirm, in well under a second) the Debian rootfs.
rootfs: build
	./bin/pyjail rootfs build --dir $(ROOTFS)

e2e: build
	cd test/e2e && PYJAIL_BIN=$(CURDIR)/bin/pyjail node --test *.test.mjs

# Three replicas sharing one data directory behind nginx, one SIGKILLed
# mid-load (test/scaleout): about 75 s. The test imports the SDK
# through test/e2e's harness, so it runs with that directory's packages.
scaleout: build
	cd test/e2e && PYJAIL_BIN=$(CURDIR)/bin/pyjail node --test ../scaleout/*.test.mjs

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet -tags $(TAGS) ./...

# The full linter set of .golangci.yml (errorlint, forbidigo, gofumpt,
# gochecknoinits, ...). Installing golangci-lint compiles it from source,
# which takes minutes, so CI runs the quick `lint` and this runs on demand.
GOLANGCI_LINT ?= $(shell go env GOPATH)/bin/golangci-lint
lint-full:
	@test -x $(GOLANGCI_LINT) || $(GO) install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@v2.15.0
	$(GOLANGCI_LINT) run ./...

bench: build
	$(GO) test -tags $(TAGS) -run '^$$' -bench . -benchtime 20x -count 1 ./test/

clean:
	rm -rf bin
