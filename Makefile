# custody — see README.md.
#   make demo     the main job: build the local control plane, run custody,
#                 and check the identity, memory, gateway and signer scenarios
#   make test     every test (unit and end-to-end), under the race detector
#   make cluster  run the local control plane in the foreground (Ctrl-C stops)
#   make bench    benchmarks

GO ?= go
export PATH := $(PATH):/usr/local/go/bin

.PHONY: demo test cluster bench build vet controlplane

build:
	$(GO) build -o bin/custody ./cmd/custody

vet:
	$(GO) vet ./...

# Builds (or reuses from the cache) etcd, kube-apiserver,
# kube-controller-manager, the agent-sandbox controller and sandboxd.
controlplane:
	$(GO) run ./test/e2e/cmd/controlplane-build

test: vet controlplane
	$(GO) test -race -count=1 -timeout 30m ./...
	cd internal/gateway/sdktest && $(GO) test -race -count=1 ./...

# demo and cluster build the control plane themselves, with progress; they
# run as built binaries so that Ctrl-C reaches them directly.
demo:
	$(GO) build -o bin/demo ./test/e2e/cmd/demo
	./bin/demo

cluster:
	$(GO) build -o bin/cluster ./test/e2e/cmd/cluster
	./bin/cluster

bench:
	$(GO) test -run '^$$' -bench . -benchmem ./internal/...
