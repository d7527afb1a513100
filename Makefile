# coopfs: the two set-up commands are `make demo` and `make test` (run as root:
# FUSE mounts and network namespaces need it). Both install what they need.
GO      ?= go
BIN     := bin/coopfs
TIMEOUT ?= 20m

# pjdfstest (the POSIX suite, Rust edition) comes from cargo; rustup puts
# cargo in ~/.cargo/bin, which a non-login shell may not have on its PATH.
CARGO_BIN := $(HOME)/.cargo/bin
export PATH := $(PATH):$(CARGO_BIN)

.PHONY: all build deps pjdfstest-deps demo test test-short fuzz pgo clean deb

all: build

build:
	$(GO) build -o $(BIN) ./cmd/coopfs

# deps installs the system packages the mounts, the testbed and the tests
# use: each command below comes from the Debian package after its colon.
DEPS := fusermount3:fuse3 ip:iproute2 tc:iproute2 setfattr:attr setfacl:acl \
	rsync:rsync sqlite3:sqlite3 bindfs:bindfs prlimit:util-linux flock:util-linux git:git \
	systemd-analyze:systemd dpkg-deb:dpkg fio:fio
deps:
	@missing=$$(for d in $(DEPS); do command -v $${d%%:*} >/dev/null 2>&1 || echo $${d##*:}; done | sort -u | tr '\n' ' '); \
	if [ -n "$$missing" ]; then \
		echo "installing $$missing(apt-get)"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
	fi

demo: deps build
	./$(BIN) demo --out bin/demo

# pjdfstest-deps installs pjdfstest and creates the users it switches to.
pjdfstest-deps:
	@if ! command -v pjdfstest >/dev/null 2>&1; then \
		command -v cargo >/dev/null 2>&1 || { echo "pjdfstest needs cargo: install Rust (https://rustup.rs) or apt-get install cargo"; exit 1; }; \
		echo "installing pjdfstest (cargo install, about a minute)"; \
		cargo install --quiet pjdfstest; \
	fi
	@id nobody >/dev/null 2>&1 || useradd -M -U -s /usr/sbin/nologin nobody
	@id tests >/dev/null 2>&1 || useradd -M -U -s /usr/sbin/nologin tests

test: deps pjdfstest-deps
	$(GO) vet ./...
	@mkdir -p bin && rm -f bin/pjdfstest-summary.txt
	COOPFS_REQUIRE_PJDFSTEST=1 COOPFS_PJDFSTEST_SUMMARY=$(CURDIR)/bin/pjdfstest-summary.txt \
		$(GO) test -count=1 -timeout $(TIMEOUT) ./...
	@cat bin/pjdfstest-summary.txt

test-short:
	$(GO) test -short ./...

# fuzz runs every fuzz target for a short while.
fuzz:
	$(GO) test ./internal/wire -run XXX -fuzz FuzzDecode -fuzztime 30s
	$(GO) test ./internal/wire -run XXX -fuzz FuzzHandshake -fuzztime 30s
	$(GO) test ./internal/sim -run XXX -fuzz FuzzCoopfsReader -fuzztime 30s
	$(GO) test ./internal/sim -run XXX -fuzz FuzzLIRSReader -fuzztime 30s
	$(GO) test ./internal/sim -run XXX -fuzz FuzzOracleReader -fuzztime 30s
	$(GO) test ./internal/sim -run XXX -fuzz FuzzOracleNSReader -fuzztime 30s
	$(GO) test ./internal/sim -run XXX -fuzz FuzzCSVReader -fuzztime 30s
	$(GO) test ./internal/sim -run XXX -fuzz FuzzCoopfsFastPath -fuzztime 30s
	for f in FuzzDecodeTag FuzzDecodeStale FuzzMetaReplay FuzzSuperblock; do \
		$(GO) test ./internal/cache/disk -run XXX -fuzz "^$$f$$" -fuzztime 30s || exit 1; done

# pgo rewrites cmd/coopfs/default.pgo, the CPU profile that `go build`
# optimizes the binary with (profile-guided optimization, on by default for
# a main package's default.pgo): every simulator algorithm on generated Zipf
# traces (42 clients and one client, the shape of docs/sim.md's suite) and
# the coopfs text reader. Rerun it after changing the simulator's hot paths;
# docs/sim.md ("How it is fast") says how its effect was measured.
PGO_RUN = $(BIN) sim run --sizes ignore --quiet --warmup 0
pgo: build
	@d=$$(mktemp -d) && trap 'rm -rf "$$d"' EXIT && set -e && \
	echo "pgo: generating traces in $$d" && \
	./$(BIN) sim gen zipf --accesses 2000000 --files 100000 --clients 42 > $$d/z42.txt && \
	./$(BIN) sim gen zipf --accesses 4000000 --files 100000 --clients 1 > $$d/z1.txt && \
	./$(BIN) sim convert --trace $$d/z42.txt --format coopfs --to oracleGeneralOpNS --out $$d/z42.bin && \
	./$(BIN) sim convert --trace $$d/z1.txt --format coopfs --to oracleGeneral --out $$d/z1.bin && \
	for a in baseline globallru nchance gms directory hints optimal; do \
		echo "pgo: profiling $$a"; \
		./$(PGO_RUN) --trace $$d/z42.bin --format oracleGeneralOpNS --clients 42 --algo $$a --cpuprofile $$d/$$a-42.prof > /dev/null; \
		./$(PGO_RUN) --trace $$d/z1.bin --format oracleGeneral --clients 1 --algo $$a --cpuprofile $$d/$$a-1.prof > /dev/null; \
	done && \
	./$(PGO_RUN) --trace $$d/z42.txt --format coopfs --clients 42 --algo baseline --cpuprofile $$d/text.prof > /dev/null && \
	$(GO) tool pprof -proto $$d/*.prof > cmd/coopfs/default.pgo && \
	echo "pgo: wrote cmd/coopfs/default.pgo; run make build to use it"

# deb builds the Debian package bin/coopfs_VERSION_ARCH.deb (the binary, the
# mount helper, the systemd units, /etc/coopfs, man pages from the help):
# docs/operations.md says how to install it.
DEB_VERSION ?= 0.1.0+git$(shell git rev-list --count HEAD 2>/dev/null || echo 0)
deb: build
	deploy/deb/build.sh $(BIN) $(DEB_VERSION) bin

clean:
	rm -rf bin
