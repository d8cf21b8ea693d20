# Klique: the two commands people need are `make run` and `make test`.
GO      ?= go
BIN     ?= bin/klique
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X github.com/klique-ai/klique/internal/version.Version=$(VERSION)

.PHONY: run build test test-sdk test-short test-faults lint generate fmt bench fuzz clean

## run: build bin/klique, then start the control plane on its embedded defaults (SQLite in ./klique-data, 127.0.0.1:8080)
# The first build compiles every dependency: a minute or more, several on a
# busy machine, with nothing else to show; so it says so before it starts.
run:
	@echo "building $(BIN): the first build takes a minute or more (later ones only what changed)..."
	@$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/klique
	@echo "starting the control plane: $(BIN) serve (its start line names every address; Ctrl-C stops it)"
	@exec $(BIN) serve

## build: build the klique binary into bin/
build:
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/klique

## test: run every test (PostgreSQL and Redis tests run when KLIQUE_TEST_DATABASE_URL / KLIQUE_TEST_REDIS_URL are set), then the Python SDK's against $(BIN)
test:
	$(GO) test -race -count=1 ./...
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/klique
	KLIQUE_BIN=$(BIN) python3 -m unittest discover -s sdk/python/tests -t sdk/python

## test-sdk: the Python SDK's tests only (a real control plane and worker from $(BIN))
test-sdk:
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/klique
	KLIQUE_BIN=$(BIN) python3 -m unittest discover -s sdk/python/tests -t sdk/python

## test-short: the fast tests only
test-short:
	$(GO) test -short -count=1 ./...

## test-faults: the fault suite (kill -9, Redis and PostgreSQL restarts, replicas) against real processes; see docs/operations.md
test-faults:
	$(GO) test -tags faults -count=1 -v -timeout 15m ./test/faults/

## lint: go vet and staticcheck
lint:
	$(GO) vet ./...
	$(GO) tool staticcheck ./...
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { echo "gofmt would change:"; gofmt -l $$(git ls-files '*.go'); exit 1; }

## generate: regenerate the GraphQL code from schema/*.graphqls (the server's, and the CLI's typed operations), and the conformance suite's per-call store
generate:
	$(GO) tool gqlgen generate
	@# gqlgen starts a goroutine per list element; graph/lists.go's marshalList shares a few.
	perl -pi -e 's/graphql\.MarshalSliceConcurrently\(/marshalList(/g' graph/generated.go
	$(GO) generate ./internal/cli/gql
	$(GO) generate ./internal/store/storetest/harness

## fmt: format the code
fmt:
	gofmt -w $$(git ls-files '*.go')

## bench: run the benchmarks
bench:
	$(GO) test -run '^$$' -bench . -benchmem ./...

## fuzz: run every fuzz target for FUZZTIME each (default 30s; FUZZ=regexp picks targets by "package Name"); crashers land in <pkg>/testdata/fuzz/
FUZZTIME ?= 30s
fuzz:
	FUZZTIME=$(FUZZTIME) GO=$(GO) bash .ci/fuzz.sh

clean:
	rm -rf bin
