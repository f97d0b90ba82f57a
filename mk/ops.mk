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
