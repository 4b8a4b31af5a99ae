# batchtune build. Go is expected at /usr/local/go/bin or on PATH.
export PATH := $(PATH):/usr/local/go/bin:$(CURDIR)/bin/tools

GO        ?= go
BIN       := bin
PKGS      := ./...
# Pinned code generators for make proto; protoc itself is Debian's 3.21.12.
PROTOC_GEN_GO      := google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.12
PROTOC_GEN_GO_GRPC := google.golang.org/grpc/cmd/protoc-gen-go-grpc@v1.6.0
# Pinned linter, built from the Go module proxy into bin/tools (make tools).
STATICCHECK        := honnef.co/go/tools/cmd/staticcheck@v0.8.2
# The packages with concurrency (goroutines sharing state), run under the
# race detector by make race.
RACE_PKGS := ./probe/... ./store/... ./tuner ./tuner/daemon ./emulator/sched

.PHONY: all build demo test test-short lint race tools bench proto image clean

all: build

build:
	$(GO) build -o $(BIN)/ ./cmd/...

# The README's first command: a tuning run of the embedded demo study (the
# bundled stand-in's accelerator model, through the process runtime).
demo: build
	$(BIN)/batchtune tune

# Every test, with the container engine required: .ci/engine-up installs
# (as root) and starts podman's Docker-compatible API when none answers,
# and the docker runtime's tests fail instead of skipping without it (as
# do the tests of other tools .ci/run installs: BATCHTUNE_REQUIRE_TOOLS).
# Packages run one at a time (-p 1): many tests measure a real server on
# this machine, and two such packages at once on 2 cores disturb each other.
# lint (gofmt, go vet, staticcheck) and race run first: they are quicker
# and fail for reasons the long run cannot fix.
# The kubernetes runtime's tests need a cluster: without
# BATCHTUNE_K8S_KUBECONFIG (.ci/run sets it), the single-node cluster of
# deploy/kubernetes/cluster is brought up (as root; about 8 min the first
# time, 15 s once its binaries are cached) and taken down after, pass or fail.
test: lint race build image
	@set -e; started=; kubeconfig="$$BATCHTUNE_K8S_KUBECONFIG"; \
	if [ -z "$$kubeconfig" ]; then \
		trap 'deploy/kubernetes/cluster/down.sh' EXIT; started=1; \
		kubeconfig=$$(deploy/kubernetes/cluster/up.sh); \
	fi; \
	echo "BATCHTUNE_K8S_KUBECONFIG=$$kubeconfig$${started:+ (brought up by make test, taken down after)}"; \
	BATCHTUNE_K8S_KUBECONFIG="$$kubeconfig" BATCHTUNE_ENGINE=required BATCHTUNE_REQUIRE_TOOLS=1 DOCKER_HOST=$$(.ci/engine-up) \
		$(GO) test -p 1 -count=1 -timeout 80m $(PKGS)

test-short:
	$(GO) test -short -count=1 $(PKGS)

lint: tools
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)
	$(BIN)/tools/staticcheck $(PKGS)

# The concurrent packages under the race detector (cgo: it needs a C
# compiler). -short keeps out the long soak and sweep tests (the full run
# without -race covers them); the race detector slows code 2-20x and CI has
# 2 cores. On this 2-core machine, cold cache: 7m10s, of which about 5 min
# is building the race-instrumented dependencies.
race:
	$(GO) test -race -short -p 1 -count=1 -timeout 20m $(RACE_PKGS)

# Pinned tools, built once into bin/tools (again when this file, and so
# perhaps a pin, changes).
tools: $(BIN)/tools/staticcheck

$(BIN)/tools/staticcheck: Makefile
	GOBIN=$(CURDIR)/$(BIN)/tools $(GO) install $(STATICCHECK)
	@touch $@

bench:
	$(GO) test -run '^$$' -bench . -benchmem $(PKGS)

proto:
	GOBIN=$(CURDIR)/bin/tools $(GO) install $(PROTOC_GEN_GO)
	GOBIN=$(CURDIR)/bin/tools $(GO) install $(PROTOC_GEN_GO_GRPC)
	protoc -I . --go_out=. --go_opt=module=github.com/batchtune/batchtune \
		--go-grpc_out=. --go-grpc_opt=module=github.com/batchtune/batchtune \
		tfserving/proto/*.proto

# The tfs-emulator image (localhost/tfs-emulator:dev): a static binary and
# the bundled models in a scratch image, built on the local engine.
IMAGE ?= localhost/tfs-emulator:dev
image:
	@.ci/engine-up >/dev/null
	rm -rf $(BIN)/image && mkdir -p $(BIN)/image
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags='-s -w' -o $(BIN)/image/tfs-emulator ./cmd/tfs-emulator
	cp -R configs/models $(BIN)/image/models
	podman build --quiet -t $(IMAGE) -f cmd/tfs-emulator/Containerfile $(BIN)/image

clean:
	rm -rf $(BIN)
