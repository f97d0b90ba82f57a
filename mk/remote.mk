# Remote cold tier (issue 32): Valkey in cluster mode for the tests in
# remote/. valkey-server and valkey-tools (valkey-cli) 8.0 come from
# bookworm-backports; where backports has no valkey (or the system is not
# Debian), Redis 7 speaks the same protocol and the tests accept its
# redis-server/redis-cli. The backports list: mk/add-backports.sh.
DEPS_TARGETS += deps-remote

.PHONY: deps-remote test-remote
deps-remote:
	@set -e; \
	if command -v valkey-server >/dev/null && command -v valkey-cli >/dev/null; then exit 0; fi; \
	codename=$$(. /etc/os-release && echo $$VERSION_CODENAME); \
	distro=$$(. /etc/os-release && echo $$ID); \
	sh mk/add-backports.sh; \
	apt-get update -qq; \
	cand=$$(apt-cache policy valkey-server 2>/dev/null | sed -n 's/^ *Candidate: //p'); \
	if [ -n "$$cand" ] && [ "$$cand" != "(none)" ]; then \
		if [ "$$distro" = debian ]; then t="-t $$codename-backports"; else t=; fi; \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$t valkey-server valkey-tools; \
	else \
		echo "no valkey-server in apt; installing Redis 7 (same protocol)"; \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends redis-server redis-tools; \
	fi; \
	systemctl disable --now valkey-server redis-server >/dev/null 2>&1 || true; \
	(valkey-server --version 2>/dev/null || redis-server --version) | head -n 1

# The remote package's tests and the daemon's remote-tier tests (each
# starts its own cluster on loopback ports, remote/valkeytest), with the
# benchmarks (BenchmarkLevelVsFile: the cluster against the backing file).
# All of these tests also run in make test. Measured with -race on the
# 2-vCPU dev VM: ./remote 22 s (TestNodeDown, a lost node of three without
# replicas, 5.5 s of it); TestRemote* in ./tests 43 s (TestRemoteNodeDown
# 9 s and TestRemoteFailoverThroughDaemon 7 s of it).
test-remote: deps-remote
	$(GO) test -count=1 -v ./remote/...
	$(GO) test -count=1 -v -run 'TestRemote' ./tests
	$(GO) test -count=1 -run '^$$' -bench . -benchtime 2s ./remote
