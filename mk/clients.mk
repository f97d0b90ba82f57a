# The client libraries in clients/: the Python package (pure Python; its
# sdist and wheel built offline by setuptools' PEP 517 hooks) and libs4d
# (C). The Python tests use NumPy when it is there, and install the wheel
# into a virtual environment (python3-venv).
CLIENT_APT_PKGS := python3-numpy python3-setuptools python3-venv unzip

.PHONY: deps-clients
DEPS_TARGETS += deps-clients
deps-clients:
	@missing=$$(for p in $(CLIENT_APT_PKGS); do dpkg -s $$p >/dev/null 2>&1 || echo $$p; done); \
	if [ -n "$$missing" ]; then \
		echo "installing:" $$missing; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
	fi

# The Python package's sdist and wheel, in bin/python (pip install
# bin/python/s4d-*.whl), and its API reference from the docstrings.
PYTHON ?= /usr/bin/python3
.PHONY: python-dist docs-python
build: python-dist
python-dist:
	@$(PYTHON) clients/python/tools/build_dist.py bin/python >/dev/null && ls bin/python/s4d-*
docs-python:
	$(PYTHON) clients/python/tools/apidoc.py > docs/reference/python.md

# libs4d: bin/libs4d.so.0 (soname libs4d.so.0) and the libs4d.so link for
# building against it; install adds s4d.h and s4d.pc for pkg-config.
LIBDIR      ?= $(PREFIX)/lib
INCLUDEDIR  ?= $(PREFIX)/include
PKGCONFIGDIR ?= $(LIBDIR)/pkgconfig
LIBS4D_SRC  := clients/c/s4d.c clients/c/s4d_frame.c
LIBS4D_HDR  := clients/c/s4d.h clients/c/s4d_internal.h
LIBS4D      := bin/libs4d.so.0
LIBS4D_CFLAGS ?= -O2 -g0

.PHONY: libs4d install-libs4d uninstall-libs4d
build: libs4d
libs4d: $(LIBS4D) bin/libs4d.so
$(LIBS4D): $(LIBS4D_SRC) $(LIBS4D_HDR)
	@mkdir -p $(dir $@)
	$(CC) $(LIBS4D_CFLAGS) $(CPPFLAGS) $(CFLAGS) -fPIC -shared -fvisibility=hidden -Wall -Wextra -Werror \
		-Wl,-soname,libs4d.so.0 -Wl,-z,relro -Wl,-z,now $(LDFLAGS_LIB) -o $@ $(LIBS4D_SRC) -lpthread
bin/libs4d.so: $(LIBS4D)
	ln -sf libs4d.so.0 $@
# The preload library of `s4d run` includes libs4d's frame layer.
bin/libs4d-run.so: clients/c/s4d_frame.c $(LIBS4D_HDR)

INSTALL_TARGETS += install-libs4d
UNINSTALL_TARGETS += uninstall-libs4d
install-libs4d: libs4d
	install -D -m 0644 $(LIBS4D) $(DESTDIR)$(LIBDIR)/libs4d.so.0
	ln -sf libs4d.so.0 $(DESTDIR)$(LIBDIR)/libs4d.so
	install -D -m 0644 clients/c/s4d.h $(DESTDIR)$(INCLUDEDIR)/s4d.h
	install -d $(DESTDIR)$(PKGCONFIGDIR)
	printf '%s\n' 'prefix=$(PREFIX)' 'libdir=$(LIBDIR)' 'includedir=$(INCLUDEDIR)' '' \
		'Name: s4d' 'Description: client library of the s4d compressed page store' 'Version: $(VERSION)' \
		'Libs: -L$${libdir} -ls4d' 'Cflags: -I$${includedir}' > $(DESTDIR)$(PKGCONFIGDIR)/s4d.pc
	chmod 0644 $(DESTDIR)$(PKGCONFIGDIR)/s4d.pc
uninstall-libs4d:
	rm -f $(DESTDIR)$(LIBDIR)/libs4d.so.0 $(DESTDIR)$(LIBDIR)/libs4d.so $(DESTDIR)$(INCLUDEDIR)/s4d.h $(DESTDIR)$(PKGCONFIGDIR)/s4d.pc

# `make deb` also builds libs4d0, libs4d-dev and python3-s4d beside s4d's
# package (packaging/deb/clients.sh).
.PHONY: deb-clients
deb: deb-clients
deb-clients: $(LIBS4D)
	sh packaging/deb/clients.sh '$(VERSION)' '$(DEB_ARCH)' '$(COMMIT)' '$(DEB_COMPRESS)' $(LIBS4D) bin

# What clients/python/bench/gpu-ratio.sh needs on a GPU host (the device
# tool's carry: .carry/pyratio): s4d, xz'd, and the nvCOMP wheel.
.PHONY: pyratio-carry
pyratio-carry:
	mkdir -p .carry/pyratio
	ls .carry/pyratio/nvidia_libnvcomp_*.whl >/dev/null 2>&1 || $(PIP_WHEEL) -d .carry/pyratio '$(NVCOMP_WHEEL)'
	$(GO) build -ldflags='-s -w' -o .carry/pyratio/s4d ./cmd/s4d
	xz -T2 -f .carry/pyratio/s4d
