# coopfs: the two set-up commands are `make demo` and `make test` (run as root:
# FUSE mounts and network namespaces need it). Both install what they need.
GO      ?= go
BIN     := bin/coopfs
TIMEOUT ?= 20m

.PHONY: all build deps demo test test-short fuzz clean

all: build

build:
	$(GO) build -o $(BIN) ./cmd/coopfs

# deps installs the system packages the mounts, the testbed and the tests use.
deps:
	@if ! command -v fusermount3 >/dev/null 2>&1 || ! command -v ip >/dev/null 2>&1 || ! command -v tc >/dev/null 2>&1; then \
		echo "installing fuse3 and iproute2 (apt-get)"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq fuse3 iproute2 >/dev/null; \
	fi

demo: deps build
	./$(BIN) demo

test: deps
	$(GO) vet ./...
	$(GO) test -count=1 -timeout $(TIMEOUT) ./...

test-short:
	$(GO) test -short ./...

# fuzz runs every fuzz target for a short while.
fuzz:
	$(GO) test ./internal/wire -run XXX -fuzz FuzzDecode -fuzztime 30s
	$(GO) test ./internal/wire -run XXX -fuzz FuzzHandshake -fuzztime 30s
	$(GO) test ./internal/sim -run XXX -fuzz FuzzCoopfsReader -fuzztime 30s
	$(GO) test ./internal/sim -run XXX -fuzz FuzzLIRSReader -fuzztime 30s

clean:
	rm -rf bin
