# Operating s4d: the tools the operations tests run (a real Prometheus that
# scrapes a daemon, promtool for the example alerts, lintian for the
# package), man pages and shell completion, and the Debian package.
DEPS_TARGETS += deps-ops

# --no-install-recommends: prometheus recommends its node exporter, which
# the tests do not need. lintian checks the package (tests/package_test.go);
# zsh and fish load the generated completion scripts (cmd/s4d/docs tests).
OPS_APT_PKGS := prometheus lintian zsh fish
deps-ops:
	@missing=$$(for p in $(OPS_APT_PKGS); do dpkg -s $$p >/dev/null 2>&1 || echo $$p; done); \
	if [ -n "$$missing" ]; then \
		echo "installing:" $$missing; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing; \
	fi

.PHONY: deps-ops

# Man pages and shell completion, written by the binary from its own CLI
# definitions (`s4d gen-docs`, hidden) and installed by `make install`.
DOCS_DIR    := bin/docs
MANDIR      ?= $(PREFIX)/share/man
BASHCOMPDIR ?= $(PREFIX)/share/bash-completion/completions
# Debian's zsh reads vendor-completions for packages, site-functions under /usr/local.
ZSHCOMPDIR  ?= $(if $(filter /usr,$(PREFIX)),$(PREFIX)/share/zsh/vendor-completions,$(PREFIX)/share/zsh/site-functions)
FISHCOMPDIR ?= $(PREFIX)/share/fish/vendor_completions.d
INSTALL_TARGETS += install-docs install-metrics-socket install-swap
UNINSTALL_TARGETS += uninstall-docs uninstall-metrics-socket uninstall-swap
# udev reads rules from /etc, /run and /usr/lib (or /lib), never from
# /usr/local: a local install puts its rule in /etc.
UDEVRULESDIR ?= $(if $(filter /usr,$(PREFIX)),$(PREFIX)/lib/udev/rules.d,/etc/udev/rules.d)

.PHONY: docs install-docs uninstall-docs install-metrics-socket uninstall-metrics-socket install-swap uninstall-swap
docs: build
	rm -rf $(DOCS_DIR)
	$(BIN) gen-docs --out $(DOCS_DIR)

# docs/reference/commands.md and config.md, from the same definitions;
# committed, and TestReferenceCurrent (cmd/s4d) fails while they differ.
.PHONY: docs-reference
docs-reference:
	$(GO) run ./cmd/s4d gen-docs --reference docs/reference

install-docs: docs
	install -d $(DESTDIR)$(MANDIR)/man1 $(DESTDIR)$(MANDIR)/man8
	install -m 0644 $(DOCS_DIR)/man1/*.1 $(DESTDIR)$(MANDIR)/man1/
	install -m 0644 $(DOCS_DIR)/man8/*.8 $(DESTDIR)$(MANDIR)/man8/
	# s4d daemon and s4d swap were in section 1 before: drop those pages.
	rm -f $(DESTDIR)$(MANDIR)/man1/s4d-daemon.1 $(DESTDIR)$(MANDIR)/man1/s4d-swap.1 $(DESTDIR)$(MANDIR)/man1/s4d-swap-*.1
	install -D -m 0644 $(DOCS_DIR)/man5/s4d.toml.5 $(DESTDIR)$(MANDIR)/man5/s4d.toml.5
	install -D -m 0644 $(DOCS_DIR)/bash/s4d $(DESTDIR)$(BASHCOMPDIR)/s4d
	install -D -m 0644 $(DOCS_DIR)/zsh/_s4d $(DESTDIR)$(ZSHCOMPDIR)/_s4d
	install -D -m 0644 $(DOCS_DIR)/fish/s4d.fish $(DESTDIR)$(FISHCOMPDIR)/s4d.fish
	install -d $(DESTDIR)$(DOCDIR)/examples
	install -m 0644 contrib/grafana/s4d-dashboard.json contrib/prometheus/s4d-alerts.yml \
		contrib/systemd/metrics.conf $(DESTDIR)$(DOCDIR)/examples/
	# docs/ as it is in the source, so the README's links work where it is installed.
	cd docs && find . -type f -name '*.md' -exec install -D -m 0644 {} $(DESTDIR)$(DOCDIR)/docs/{} \;

# s4d-metrics.socket: /metrics on 127.0.0.1:9367 for the sandboxed
# service, which has no network of its own; not enabled by install.
install-metrics-socket:
	install -d $(DESTDIR)$(UNITDIR)
	sed -e 's|/usr/local/share/doc/s4d|$(DOCDIR)|' systemd/s4d-metrics.socket > $(DESTDIR)$(UNITDIR)/s4d-metrics.socket
	chmod 0644 $(DESTDIR)$(UNITDIR)/s4d-metrics.socket

uninstall-metrics-socket:
	rm -f $(DESTDIR)$(UNITDIR)/s4d-metrics.socket

# Swap on s4d (docs/admin/swap.md), as the Debian package has it: the unit
# that makes each of the daemon's devices swap and the udev rule that
# starts it are installed (they do nothing until the daemon makes a
# device); the drop-in that gives s4d.service root and the module list
# that loads ublk_drv at boot are examples, since a daemon that serves
# only its socket needs neither.
install-swap:
	install -d $(DESTDIR)$(UNITDIR) $(DESTDIR)$(UDEVRULESDIR) $(DESTDIR)$(DOCDIR)
	sed -e 's|/usr/local/bin/s4d|$(BINDIR)/s4d|' -e 's|/usr/local/share/doc/s4d|$(DOCDIR)|' \
		systemd/s4d-swap@.service > $(DESTDIR)$(UNITDIR)/s4d-swap@.service
	chmod 0644 $(DESTDIR)$(UNITDIR)/s4d-swap@.service
	install -m 0644 systemd/60-s4d-swap.rules $(DESTDIR)$(UDEVRULESDIR)/60-s4d-swap.rules
	install -m 0644 systemd/s4d-swap.conf $(DESTDIR)$(DOCDIR)/s4d-swap.conf.example
	install -m 0644 systemd/s4d-swap.modules-load $(DESTDIR)$(DOCDIR)/s4d-swap.modules-load.example
	@if [ -z "$(DESTDIR)" ] && command -v udevadm >/dev/null && [ -d /run/udev ]; then udevadm control --reload || true; fi

uninstall-swap:
	rm -f $(DESTDIR)$(UNITDIR)/s4d-swap@.service $(DESTDIR)$(UDEVRULESDIR)/60-s4d-swap.rules

uninstall-docs:
	rm -f $(DESTDIR)$(MANDIR)/man1/s4d.1 $(DESTDIR)$(MANDIR)/man1/s4d-*.1 $(DESTDIR)$(MANDIR)/man8/s4d-*.8 $(DESTDIR)$(MANDIR)/man5/s4d.toml.5 $(DESTDIR)$(BASHCOMPDIR)/s4d \
	      $(DESTDIR)$(ZSHCOMPDIR)/_s4d $(DESTDIR)$(FISHCOMPDIR)/s4d.fish

# The Debian package: `make install` into a staging root with Debian's
# paths, plus the control files from packaging/deb. GPU runtimes are not in
# it (the daemon loads them at run time when present): Suggests only.
DEB_ARCH := $(shell dpkg --print-architecture 2>/dev/null || echo amd64)
DEB_ROOT := bin/deb
DEB       = bin/s4d_$(VERSION)_$(DEB_ARCH).deb
DEB_DOC  := $(DEB_ROOT)/usr/share/doc/s4d
# Position-independent, as Debian builds its binaries (lintian checks).
DEB_BUILDFLAGS ?= -buildmode=pie
# xz packs a quarter smaller than gzip and takes 4-5 times as long.
DEB_COMPRESS ?= xz
.PHONY: deb deb-lint

deb:
	rm -rf $(DEB_ROOT)
	$(MAKE) --no-print-directory install DESTDIR=$(CURDIR)/$(DEB_ROOT) PREFIX=/usr UNITDIR=/lib/systemd/system \
		UDEVRULESDIR=/lib/udev/rules.d INSTALL_TARGETS='install-docs install-metrics-socket install-swap install-run-lib' EXTRA_BUILDFLAGS='$(DEB_BUILDFLAGS)' EXTRA_LDFLAGS='-s -w' >/dev/null
	gzip -9n $(DEB_ROOT)/usr/share/man/man1/*.1 $(DEB_ROOT)/usr/share/man/man5/*.5 $(DEB_ROOT)/usr/share/man/man8/*.8
	strip --strip-unneeded --remove-section=.comment --remove-section=.note $(DEB_ROOT)/usr/lib/s4d/libs4d-run.so
	install -m 0644 packaging/deb/copyright $(DEB_DOC)/copyright
	printf 's4d (%s) unstable; urgency=medium\n\n  * Built from commit %s.\n\n -- %s  %s\n' \
		'$(VERSION)' '$(COMMIT)' "$$(sed -n 's/^Maintainer: //p' packaging/deb/control.in)" \
		"$$(date -u -R -d @$${SOURCE_DATE_EPOCH:-$$(git log -1 --format=%ct 2>/dev/null || date +%s)})" \
		| gzip -9n > $(DEB_DOC)/changelog.gz
	install -d $(DEB_ROOT)/DEBIAN
	install -m 0755 packaging/deb/postinst packaging/deb/prerm packaging/deb/postrm $(DEB_ROOT)/DEBIAN/
	echo /etc/s4d/s4d.toml > $(DEB_ROOT)/DEBIAN/conffiles
	# The newest glibc symbol version the binary uses is the libc6 it needs.
	glibc=$$(objdump -T $(DEB_ROOT)/usr/bin/s4d | grep -o 'GLIBC_[0-9.]*' | sed 's/GLIBC_//' | sort -V | tail -n 1); \
	size=$$(du -sk --exclude=DEBIAN $(DEB_ROOT) | cut -f1); \
	sed -e 's/@VERSION@/$(VERSION)/' -e 's/@ARCH@/$(DEB_ARCH)/' -e "s/@SIZE@/$$size/" -e "s/@GLIBC@/$$glibc/" \
		packaging/deb/control.in > $(DEB_ROOT)/DEBIAN/control
	cd $(DEB_ROOT) && find . -type f ! -path './DEBIAN/*' -printf '%P\0' | sort -z | xargs -0 md5sum > DEBIAN/md5sums
	chmod 0644 $(DEB_ROOT)/DEBIAN/md5sums $(DEB_ROOT)/DEBIAN/conffiles $(DEB_ROOT)/DEBIAN/control
	dpkg-deb --root-owner-group -Z$(DEB_COMPRESS) --build $(DEB_ROOT) $(DEB)

# lintian's errors fail; its warnings are printed.
deb-lint: deb
	lintian --fail-on error $(DEB)
