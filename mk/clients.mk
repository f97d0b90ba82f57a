# The client libraries in clients/: the Python package (pure Python, nothing
# to build) and libs4d (C). The Python tests use NumPy when it is there.
CLIENT_APT_PKGS := python3-numpy

.PHONY: deps-clients
DEPS_TARGETS += deps-clients
deps-clients:
	@missing=$$(for p in $(CLIENT_APT_PKGS); do dpkg -s $$p >/dev/null 2>&1 || echo $$p; done); \
	if [ -n "$$missing" ]; then \
		echo "installing:" $$missing; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
	fi
