# s4d build, install and test entry points. Engine-specific rules live in
# mk/*.mk and add themselves to DEPS_TARGETS.
GO      ?= go
PREFIX  ?= /usr/local
DESTDIR ?=
SOCKET  ?= $(CURDIR)/run/s4d.sock
BIN     := bin/s4d
DEPS_TARGETS := deps-system deps-go
BINDIR      ?= $(PREFIX)/bin
UNITDIR     ?= $(PREFIX)/lib/systemd/system
SYSUSERSDIR ?= $(PREFIX)/lib/sysusers.d
DOCDIR      ?= $(PREFIX)/share/doc/s4d
CONFDIR     ?= /etc/s4d
# Engine rules add their runtime libraries here.
INSTALL_TARGETS :=
UNINSTALL_TARGETS :=

.PHONY: all build deps deps-system deps-go test fuzz soak run clean install uninstall

# Native fuzz targets, package:target:runs. Budgets are counts of runs, about
# 10 s each here, not durations: with a duration, Go's fuzzing coordinator
# (before Go 1.27, golang/go#75804) can fail a target at the deadline with a
# bare "context deadline exceeded", no input and no crash (two CI runs went
# red so). FUZZTIME=... gives every target that budget instead.
FUZZ_TARGETS := ./ipc:FuzzReadFrame:300000 ./ipc:FuzzFrameReader:80000 ./ipc:FuzzDecodePut:300000 \
	./ipc:FuzzDecodePutFD:300000 ./daemon:FuzzHandle:80000 ./clientmem:FuzzMapPages:300000 \
	./backends/cpu:FuzzDecodePage:300000 ./backends/cpu:FuzzRoundTrip:250000 ./backends/pagelz4:FuzzRoundTrip:300000 \
	./backing:FuzzDecodeIndex:300000 ./backends/all:FuzzDifferential:10000 ./remote:FuzzReadReply:120000
FUZZTIME ?=
# Runs spent shrinking each new input: by default Go spends up to a minute
# on each, and FuzzDifferential (every engine, both ways) finds new inputs
# often enough to spend a short pass shrinking them.
FUZZMINIMIZE ?= 1000x
SOAKTIME ?= 5m
all: build

-include mk/*.mk

# What `s4d --version` says: the daemon's version constant (one place to
# bump), the commit, and the build date (SOURCE_DATE_EPOCH when set, so a
# package build is reproducible).
VERSION    ?= $(shell sed -n 's/^const Version = "s4d \(.*\)"$$/\1/p' daemon/server.go)
COMMIT     ?= $(shell git rev-parse --short=12 HEAD 2>/dev/null)$(shell git diff --quiet HEAD -- 2>/dev/null || echo +dirty)
BUILD_DATE ?= $(shell date -u -d @$${SOURCE_DATE_EPOCH:-$$(date +%s)} +%Y-%m-%dT%H:%M:%SZ)
BUILDINFO  := github.com/s4d-project/s4d/cmd/s4d/buildinfo
LDFLAGS    := -X $(BUILDINFO).version=$(VERSION) -X $(BUILDINFO).commit=$(COMMIT) -X $(BUILDINFO).date=$(BUILD_DATE)

build:
	$(GO) build $(EXTRA_BUILDFLAGS) -ldflags '$(LDFLAGS) $(EXTRA_LDFLAGS)' -o $(BIN) ./cmd/s4d

# System packages: the reference decoders used by the tests, and cc for cgo
# and tests/zramcheck.
APT_PKGS := python3-lz4 zstd ca-certificates gcc
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
	$(MAKE) --no-print-directory fuzz

fuzz:
	@for t in $(FUZZ_TARGETS); do \
		pkg=$${t%%:*}; rest=$${t#*:}; name=$${rest%%:*}; budget=$${rest##*:}x; \
		[ -z "$(FUZZTIME)" ] || budget=$(FUZZTIME); \
		echo "fuzz $$pkg $$name for $$budget"; \
		out=$$($(GO) test $$pkg -run '^$$' -fuzz "^$$name$$" -fuzztime $$budget -fuzzminimizetime $(FUZZMINIMIZE) 2>&1); rc=$$?; \
		if [ $$rc -eq 0 ]; then echo "$$out" | tail -n 3; else echo "$$out" | grep -v '^fuzz: elapsed' | tail -n 80; exit 1; fi; \
	done

# A longer randomized run against the real daemon, every byte checked.
soak:
	S4D_SOAK=$(SOAKTIME) $(GO) test -race -count=1 -timeout 0 -run TestSoak -v ./tests

run: deps build
	$(BIN) daemon --socket $(SOCKET) --backend auto

clean:
	rm -rf bin run

# Installs the binary, units, sysusers entry, docs and (if absent) the
# config file; with DESTDIR empty it also creates the user and reloads systemd.
install: build $(INSTALL_TARGETS)
	install -D -m 0755 $(BIN) $(DESTDIR)$(BINDIR)/s4d
	install -d $(DESTDIR)$(UNITDIR) $(DESTDIR)$(SYSUSERSDIR) $(DESTDIR)$(DOCDIR) $(DESTDIR)$(CONFDIR)
	sed -e 's|/usr/local/bin/s4d|$(BINDIR)/s4d|' -e 's|/etc/s4d/|$(CONFDIR)/|' \
	    -e 's|/usr/local/share/doc/s4d|$(DOCDIR)|' systemd/s4d.service > $(DESTDIR)$(UNITDIR)/s4d.service
	sed -e 's|/usr/local/share/doc/s4d|$(DOCDIR)|' systemd/s4d.socket > $(DESTDIR)$(UNITDIR)/s4d.socket
	chmod 0644 $(DESTDIR)$(UNITDIR)/s4d.service $(DESTDIR)$(UNITDIR)/s4d.socket
	install -m 0644 systemd/s4d.sysusers $(DESTDIR)$(SYSUSERSDIR)/s4d.conf
	install -m 0644 systemd/s4d.toml $(DESTDIR)$(DOCDIR)/s4d.toml.example
	install -m 0644 README.md ipc/PROTOCOL.md $(DESTDIR)$(DOCDIR)/
	[ -e $(DESTDIR)$(CONFDIR)/s4d.toml ] || install -m 0644 systemd/s4d.toml $(DESTDIR)$(CONFDIR)/s4d.toml
	@if [ -z "$(DESTDIR)" ] && [ -d /run/systemd/system ]; then \
		systemd-sysusers $(SYSUSERSDIR)/s4d.conf && systemctl daemon-reload; \
		echo "installed; start with: systemctl enable --now s4d.socket"; \
	fi

# Removes what install put there; the config file goes only if unchanged.
uninstall: $(UNINSTALL_TARGETS)
	rm -f $(DESTDIR)$(BINDIR)/s4d $(DESTDIR)$(UNITDIR)/s4d.service $(DESTDIR)$(UNITDIR)/s4d.socket \
	      $(DESTDIR)$(SYSUSERSDIR)/s4d.conf
	cmp -s systemd/s4d.toml $(DESTDIR)$(CONFDIR)/s4d.toml && rm -f $(DESTDIR)$(CONFDIR)/s4d.toml || true
	rm -rf $(DESTDIR)$(DOCDIR)
	-rmdir $(DESTDIR)$(CONFDIR) 2>/dev/null
	@if [ -z "$(DESTDIR)" ] && [ -d /run/systemd/system ]; then systemctl daemon-reload; fi
