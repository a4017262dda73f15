# custody — see README.md.
#   make demo     the main job: build the local control plane, run custody,
#                 and check the identity, memory, gateway and signer scenarios
#   make test     every test (unit, end-to-end, the official provider SDKs
#                 against the gateway, under the race detector; then the
#                 Python and TypeScript SDKs against a real custody serve)
#   make cluster  run the local control plane and a real node in the
#                 foreground (Ctrl-C stops and restores the host)
#   make node-binaries  build and smoke-check the real node's binaries (cached)
#   make bench    the hot paths against their floors (bench-all: every benchmark)
#   make sdk-ts-test  the TypeScript SDK (sdk/typescript): npm ci, tsc, node --test
#                 against a custody serve built here

GO ?= go
export PATH := $(PATH):/usr/local/go/bin

.PHONY: demo test cluster bench bench-all build vet controlplane node-binaries sdk-deps postgres sdk-python-test sdk-ts-test

build:
	$(GO) build -o bin/custody ./cmd/custody

vet:
	$(GO) vet ./...
	cd test/sdk && $(GO) vet ./...

# The npm SDKs the gateway is tested with (test/sdk/node), at the versions
# in its package-lock.json; node_modules is reused while the lock is unchanged.
sdk-deps: test/sdk/node/node_modules/.package-lock.json

test/sdk/node/node_modules/.package-lock.json: test/sdk/node/package-lock.json
	@echo "installing the npm SDKs (openai, @anthropic-ai/sdk, @google/genai) for test/sdk ..."
	cd test/sdk/node && npm ci --no-audit --no-fund --loglevel=error

# Builds (or reuses from the cache) etcd, kube-apiserver,
# kube-controller-manager, the agent-sandbox controller and sandboxd.
controlplane:
	$(GO) run ./test/e2e/cmd/controlplane-build

# Builds (or reuses from the cache) and smoke-checks the real node's
# binaries: kubelet, kube-proxy, kube-scheduler, CoreDNS (trimmed plugin
# set) and kube-network-policies with tools/knp/compat-queue.patch.
# demo, cluster and test/e2e/onnode run them (see README).
node-binaries:
	$(GO) run ./test/e2e/cmd/controlplane-build -node

# test/e2e/onnode runs on its own, after the rest: it brings up the real
# node (one per machine), which must not share the 2 cores with the
# stand-in end-to-end tests' timing-sensitive checks.
# A PostgreSQL at $CUSTODY_TEST_POSTGRES_URL (default the machine's own on
# 127.0.0.1:5432): installed from Debian and started if none answers.
postgres:
	@bash .ci/postgres-up >/dev/null

test: vet controlplane node-binaries sdk-deps postgres
	$(GO) test -race -count=1 -timeout 30m $$($(GO) list ./... | grep -v /test/e2e/onnode)
	$(GO) test -race -count=1 -timeout 30m -v ./test/e2e/onnode
	cd test/sdk && $(GO) test -race -count=1 -timeout 10m ./...
	$(MAKE) sdk-python-test sdk-ts-test

# The Python SDK (sdk/python) against a real custody serve built here,
# on 127.0.0.1 only; needs python3 (3.9+) and the openssl CLI, nothing
# from a package index.
sdk-python-test:
	$(GO) build -o bin/custody ./cmd/custody
	CUSTODY_BIN=$(CURDIR)/bin/custody python3 -m unittest discover -s sdk/python/tests -v

# demo and cluster build the control plane themselves, with progress; they
# run as built binaries so that Ctrl-C reaches them directly.
demo: postgres
	$(GO) build -o bin/demo ./test/e2e/cmd/demo
	./bin/demo

cluster:
	$(GO) build -o bin/cluster ./test/e2e/cmd/cluster
	./bin/cluster

# The hot paths against their floors, each floor measured in the same
# run (ratios named *x-floor*, *x_floor*, *-ratio): the signer's decide
# (in process and over HTTP on a real custody serve, SQLite and
# PostgreSQL), memory remember/recall at 10k and 100k, the gateway's CPU,
# allocations and tail, the identity exchange on a real kube-apiserver.
# bench-all runs every benchmark.
# Every command's output is shown and also appended to $(BENCH_LOG) (the
# recipe runs in bash with pipefail, so a failing benchmark still fails
# make); test/bench/cmd/benchsum then reads the log and prints the
# performance targets, measured value beside target, met or not.
BENCH_POSTGRES ?= $(or $(CUSTODY_TEST_POSTGRES_URL),postgres://postgres@127.0.0.1:5432/test?sslmode=disable)
BENCH_LOG ?= build/bench.log
bench: SHELL := bash
bench: .SHELLFLAGS := -o pipefail -c
bench: controlplane postgres
	mkdir -p '$(dir $(BENCH_LOG))' && : > '$(BENCH_LOG)'
	$(GO) test -run '^$$' -bench 'BenchmarkDecideAppend$$|BenchmarkDecideAppendPostgres$$' -benchtime 20000x ./internal/signer 2>&1 | tee -a '$(BENCH_LOG)'
	$(GO) test -run '^$$' -bench 'BenchmarkRemember|BenchmarkRecall' ./internal/store/sqlite ./internal/store/postgres 2>&1 | tee -a '$(BENCH_LOG)'
	$(GO) test -run '^$$' -bench 'BenchmarkCPUPerRequest|BenchmarkAddedLatency' -benchtime 3000x -count 3 ./internal/gateway 2>&1 | tee -a '$(BENCH_LOG)'
	$(GO) test -run '^$$' -bench 'BenchmarkExchange' ./internal/kubeauth 2>&1 | tee -a '$(BENCH_LOG)'
	$(GO) run ./test/bench/cmd/serveload 2>&1 | tee -a '$(BENCH_LOG)'
	$(GO) run ./test/bench/cmd/serveload -postgres '$(BENCH_POSTGRES)' 2>&1 | tee -a '$(BENCH_LOG)'
	@echo "full log: $(BENCH_LOG)"
	$(GO) run ./test/bench/cmd/benchsum < '$(BENCH_LOG)'

bench-all:
	$(GO) test -run '^$$' -bench . -benchmem ./internal/... ./verify/...

# The TypeScript SDK: its dev dependencies (typescript, @types/node; it has
# no runtime ones) from its package-lock.json, the build (tsc -> dist/),
# then node --test against a custody serve built once for the run (nice:
# it shares the cores) and on 127.0.0.1 only.
sdk-ts-test:
	cd sdk/typescript && npm ci --no-audit --no-fund --loglevel=error && npm run build
	@tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp"' EXIT && \
	echo "building custody for the TypeScript SDK tests ..." && \
	nice -n 19 $(GO) build -o "$$tmp/custody" ./cmd/custody && \
	cd sdk/typescript && CUSTODY_BIN="$$tmp/custody" npm test
