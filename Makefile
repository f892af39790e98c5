# Vidra — build, generate, test.
#   make demo   the main job on a local sandbox fleet
#   make test   every test (builds the control plane on first use)

SHELL := /usr/bin/env bash -o pipefail
.SHELLFLAGS := -ec
.DEFAULT_GOAL := build

BIN        := $(CURDIR)/bin
TOOLS      := $(BIN)/tools
K8S_ASSETS := $(BIN)/k8s

# Tool versions are pinned; each is installed from its Go module into bin/tools.
CONTROLLER_GEN_VERSION := v0.21.0
GOLANGCI_LINT_VERSION  := v2.13.0
HELM_VERSION           := v3.19.0

CONTROLLER_GEN := $(TOOLS)/controller-gen-$(CONTROLLER_GEN_VERSION)
GOLANGCI_LINT  := $(TOOLS)/golangci-lint-$(GOLANGCI_LINT_VERSION)
HELM           := $(TOOLS)/helm-$(HELM_VERSION)

GO_TEST_FLAGS ?= -count=1 -timeout=30m

# The version the binaries report (a pull cluster's agent tells the hub its own).
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X github.com/vidra-operator/vidra/internal/runtime/version.version=$(VERSION)

.PHONY: build
build: ## Build bin/vidra and the kubectl plugin bin/kubectl-vidra.
	go build -trimpath -ldflags "$(LDFLAGS)" -o $(BIN)/vidra ./cmd/vidra
	go build -trimpath -ldflags "$(LDFLAGS)" -o $(BIN)/kubectl-vidra ./cmd/kubectl-vidra

RELEASE_DIR ?= $(BIN)/release

.PHONY: release
release: ## Build a release into bin/release (VERSION=vX.Y.Z; REGISTRY=host/path pushes, PLAIN_HTTP=1 over HTTP).
	go run ./hack/release -version "$(VERSION)" -out "$(RELEASE_DIR)" -registry "$(REGISTRY)" \
		-source-date-epoch "$$(git log -1 --format=%ct)" $(if $(PLAIN_HTTP),-plain-http)

.PHONY: generate
generate: $(CONTROLLER_GEN) ## Regenerate deepcopy code and CRDs from apis/.
	$(CONTROLLER_GEN) object paths=./apis/...
	$(CONTROLLER_GEN) crd:allowDangerousTypes=false paths=./apis/... output:crd:artifacts:config=config/crd/bases
	hack/kubevirt-crds.sh $(CONTROLLER_GEN)
	hack/chart-crds.sh

.PHONY: verify
verify: $(CONTROLLER_GEN) ## Fail when generated files, formatting or go.mod are stale.
	hack/verify-generated.sh
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { echo "gofmt needed:"; gofmt -l $$(git ls-files '*.go'); exit 1; }
	go mod tidy -diff
	cd hack/controlplane && go mod tidy -diff

.PHONY: control-plane
control-plane: ## Build kube-apiserver, etcd, kube-controller-manager and kubectl into bin/k8s (once).
	hack/build-control-plane.sh $(K8S_ASSETS)

.PHONY: browser
browser: ## Install Debian's chromium for the UI's browser test (once; as root).
	hack/install-browser.sh

.PHONY: test
test: control-plane build verify vet $(HELM) browser ## Run unit, envtest, browser and e2e tests on real control planes.
	KUBEBUILDER_ASSETS=$(K8S_ASSETS) VIDRA_BINARY=$(BIN)/vidra KUBECTL_VIDRA=$(BIN)/kubectl-vidra HELM=$(HELM) go test $(GO_TEST_FLAGS) ./...
	$(MAKE) --no-print-directory fuzz
	DEMO_EXIT=1 $(MAKE) --no-print-directory demo

FUZZ_TIME ?= 15s

.PHONY: fuzz
fuzz: ## Fuzz the manifest decoder for FUZZ_TIME (the checked-in corpus also runs in make test).
	go test -run '^$$' -fuzz FuzzDecode -fuzztime $(FUZZ_TIME) ./internal/engine/manifest

BENCH_FLAGS ?=

.PHONY: bench
bench: control-plane build helm ## The operator on real control planes (table + bin/bench/results.json), then the Go benchmarks.
	KUBEBUILDER_ASSETS=$(K8S_ASSETS) HELM=$(HELM) go run ./bench $(BENCH_FLAGS)
	KUBEBUILDER_ASSETS=$(K8S_ASSETS) go test -run '^$$' -bench . -benchtime=1x -timeout=30m ./providers/... ./controllers/... ./internal/source/gitsource/...

.PHONY: vet
vet: ## go vet every package.
	go vet ./...

# The first commit whose message follows hack/githooks/commit-msg; those since are checked.
COMMITS_SINCE ?= 5907400

.PHONY: lint
lint: $(GOLANGCI_LINT) ## Run golangci-lint, and check the commit messages since COMMITS_SINCE.
	$(GOLANGCI_LINT) run ./...
	hack/check-commits.sh $(COMMITS_SINCE)

.PHONY: hooks
hooks: ## Check each commit message as it is written (git's commit-msg hook).
	git config core.hooksPath hack/githooks

.PHONY: demo
demo: control-plane build ## The main job on a local sandbox fleet (Ctrl-C ends it; DEMO_EXIT=1 exits after printing).
	go run ./hack/demo

.PHONY: clean
clean: ## Remove built binaries (the control plane cache in bin/k8s stays).
	rm -f $(BIN)/vidra

$(CONTROLLER_GEN):
	@mkdir -p $(TOOLS)
	GOBIN=$(TOOLS) go install sigs.k8s.io/controller-tools/cmd/controller-gen@$(CONTROLLER_GEN_VERSION)
	mv $(TOOLS)/controller-gen $@

$(GOLANGCI_LINT):
	@mkdir -p $(TOOLS)
	GOBIN=$(TOOLS) go install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION)
	mv $(TOOLS)/golangci-lint $@

.PHONY: helm
helm: $(HELM) ## Build the pinned helm binary into bin/tools.

$(HELM):
	@mkdir -p $(TOOLS)
	GOBIN=$(TOOLS) go install helm.sh/helm/v3/cmd/helm@$(HELM_VERSION)
	mv $(TOOLS)/helm $@

.PHONY: help
help: ## List the targets.
	@grep -hE '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-14s %s\n", $$1, $$2}'
