# Operating s4d: the tools the operations tests run (a real Prometheus that
# scrapes a daemon, promtool for the example alerts, lintian for the
# package), man pages and shell completion, and the Debian package.
DEPS_TARGETS += deps-ops

# --no-install-recommends: prometheus recommends its node exporter, which
# the tests do not need.
OPS_APT_PKGS := prometheus
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
INSTALL_TARGETS += install-docs
UNINSTALL_TARGETS += uninstall-docs

.PHONY: docs install-docs uninstall-docs
docs: build
	rm -rf $(DOCS_DIR)
	$(BIN) gen-docs --out $(DOCS_DIR)

install-docs: docs
	install -d $(DESTDIR)$(MANDIR)/man1
	install -m 0644 $(DOCS_DIR)/man1/*.1 $(DESTDIR)$(MANDIR)/man1/
	install -D -m 0644 $(DOCS_DIR)/bash/s4d $(DESTDIR)$(BASHCOMPDIR)/s4d
	install -D -m 0644 $(DOCS_DIR)/zsh/_s4d $(DESTDIR)$(ZSHCOMPDIR)/_s4d
	install -D -m 0644 $(DOCS_DIR)/fish/s4d.fish $(DESTDIR)$(FISHCOMPDIR)/s4d.fish
	install -d $(DESTDIR)$(DOCDIR)/examples
	install -m 0644 contrib/grafana/s4d-dashboard.json contrib/prometheus/s4d-alerts.yml \
		contrib/systemd/metrics.conf $(DESTDIR)$(DOCDIR)/examples/

uninstall-docs:
	rm -f $(DESTDIR)$(MANDIR)/man1/s4d.1 $(DESTDIR)$(MANDIR)/man1/s4d-*.1 $(DESTDIR)$(BASHCOMPDIR)/s4d \
	      $(DESTDIR)$(ZSHCOMPDIR)/_s4d $(DESTDIR)$(FISHCOMPDIR)/s4d.fish
