# s4d build, install and test entry points. Engine-specific rules live in
# mk/*.mk and add themselves to DEPS_TARGETS.
GO      ?= go
PREFIX  ?= /usr/local
DESTDIR ?=
SOCKET  ?= $(CURDIR)/run/s4d.sock
BIN     := bin/s4d
DEPS_TARGETS := deps-system deps-go

.PHONY: all build deps deps-system deps-go test run clean
all: build

-include mk/*.mk

build:
	$(GO) build -o $(BIN) ./cmd/s4d

# System packages: the reference decoders used by the tests.
APT_PKGS := python3-lz4 zstd ca-certificates
deps-system:
	@missing=$$(for p in $(APT_PKGS); do dpkg -s $$p >/dev/null 2>&1 || echo $$p; done); \
	if [ -n "$$missing" ]; then \
		echo "installing:" $$missing; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
	fi

deps-go:
	$(GO) mod download

deps: $(DEPS_TARGETS)

test: deps
	$(GO) vet ./...
	$(GO) test -race -count=1 -timeout 20m ./...

run: deps build
	$(BIN) daemon --socket $(SOCKET) --backend auto

clean:
	rm -rf bin run
