# WebGPU backend: Dawn (from the npm package bun-webgpu-linux-x64, pinned by
# its integrity hash) and a Vulkan driver. Without a GPU the driver is Mesa's
# lavapipe; Dawn needs Mesa >= 25 (bookworm-backports), Mesa 22's lavapipe
# only gives Dawn's Null adapter.
DEPS_TARGETS += deps-webgpu
INSTALL_TARGETS += install-webgpu
UNINSTALL_TARGETS += uninstall-webgpu

DAWN_NPM       := bun-webgpu-linux-x64@0.1.7
DAWN_INTEGRITY := sha512-UEP7UZdEhx9otvkZczjsszL8ZVlrODANQvgl+C88/bNVmxDoFi7w1fWzGi1sZyakiETjmtFDq2/xCLhbSZxjqw==
DAWN_SO        := libwebgpu_wrapper.so
# Where the daemon looks first (backends/webgpu searches here by default).
WEBGPU_LIBDIR  ?= /usr/local/lib/s4d
DAWN_CACHE     := .deps/webgpu
# The second implementation: wgpu-native, from the `wgpu` wheel on PyPI,
# pinned by the wheel's sha256.
WGPU_VERSION   := 0.32.0
WGPU_WHEEL     := wgpu-$(WGPU_VERSION)-py3-none-manylinux_2_28_x86_64.whl
WGPU_SHA256    := 6499a31b5a29a10b4f1089fea4a0806411f42605fa86b6c0b543a07ca0de8568
WGPU_WHEEL_SO  := wgpu/resources/libwgpu_native-release.so
WGPU_SO        := libwgpu_native.so
WGPU_CACHE     := .deps/wgpu-native
MESA_MIN       := 25

.PHONY: deps-webgpu deps-dawn deps-wgpu deps-vulkan install-webgpu uninstall-webgpu

deps-webgpu: deps-dawn deps-wgpu deps-vulkan

# npm pack downloads the tarball; its integrity is compared with the pinned
# hash before anything is unpacked or installed.
deps-dawn:
	@set -e; \
	if [ -f $(WEBGPU_LIBDIR)/$(DAWN_SO) ] && [ -f $(DAWN_CACHE)/ok ] && \
	   cmp -s $(DAWN_CACHE)/package/$(DAWN_SO) $(WEBGPU_LIBDIR)/$(DAWN_SO); then exit 0; fi; \
	mkdir -p $(DAWN_CACHE); rm -rf $(DAWN_CACHE)/package $(DAWN_CACHE)/ok; \
	tgz=$$(cd $(DAWN_CACHE) && npm pack --silent $(DAWN_NPM) 2>/dev/null | tail -n 1); \
	got="sha512-$$(openssl dgst -sha512 -binary $(DAWN_CACHE)/$$tgz | base64 -w0)"; \
	if [ "$$got" != "$(DAWN_INTEGRITY)" ]; then \
		echo "$(DAWN_NPM): integrity $$got, want $(DAWN_INTEGRITY)" >&2; rm -f $(DAWN_CACHE)/$$tgz; exit 1; \
	fi; \
	tar -xzf $(DAWN_CACHE)/$$tgz -C $(DAWN_CACHE); \
	so=$$(find $(DAWN_CACHE)/package -name $(DAWN_SO) | head -n 1); \
	[ -n "$$so" ] || { echo "$(DAWN_SO) not in $(DAWN_NPM)" >&2; exit 1; }; \
	[ "$$so" = $(DAWN_CACHE)/package/$(DAWN_SO) ] || cp "$$so" $(DAWN_CACHE)/package/$(DAWN_SO); \
	install -D -m 0644 $(DAWN_CACHE)/package/$(DAWN_SO) $(WEBGPU_LIBDIR)/$(DAWN_SO); \
	touch $(DAWN_CACHE)/ok; echo "installed $(WEBGPU_LIBDIR)/$(DAWN_SO) from $(DAWN_NPM)"

# pip download fetches the wheel alone (no dependencies, no sdist); its
# sha256 is compared with the pinned one before the library is extracted.
deps-wgpu:
	@set -e; \
	if [ -f $(WEBGPU_LIBDIR)/$(WGPU_SO) ] && [ -f $(WGPU_CACHE)/ok ] && \
	   cmp -s $(WGPU_CACHE)/$(WGPU_SO) $(WEBGPU_LIBDIR)/$(WGPU_SO); then exit 0; fi; \
	mkdir -p $(WGPU_CACHE); rm -f $(WGPU_CACHE)/ok $(WGPU_CACHE)/$(WGPU_SO); \
	[ -f $(WGPU_CACHE)/$(WGPU_WHEEL) ] || python3 -m pip download -q --no-deps --only-binary=:all: \
		--platform manylinux_2_28_x86_64 --python-version 3.12 -d $(WGPU_CACHE) wgpu==$(WGPU_VERSION); \
	[ -f $(WGPU_CACHE)/$(WGPU_WHEEL) ] || { echo "wgpu $(WGPU_VERSION): pip did not fetch $(WGPU_WHEEL)" >&2; exit 1; }; \
	got=$$(sha256sum $(WGPU_CACHE)/$(WGPU_WHEEL) | cut -d' ' -f1); \
	if [ "$$got" != "$(WGPU_SHA256)" ]; then \
		echo "$(WGPU_WHEEL): sha256 $$got, want $(WGPU_SHA256)" >&2; rm -f $(WGPU_CACHE)/$(WGPU_WHEEL); exit 1; \
	fi; \
	python3 -c 'import sys, zipfile; sys.stdout.buffer.write(zipfile.ZipFile(sys.argv[1]).read(sys.argv[2]))' \
		$(WGPU_CACHE)/$(WGPU_WHEEL) $(WGPU_WHEEL_SO) > $(WGPU_CACHE)/$(WGPU_SO).tmp; \
	[ -s $(WGPU_CACHE)/$(WGPU_SO).tmp ] || { echo "$(WGPU_WHEEL_SO) not in $(WGPU_WHEEL)" >&2; exit 1; }; \
	mv $(WGPU_CACHE)/$(WGPU_SO).tmp $(WGPU_CACHE)/$(WGPU_SO); \
	install -D -m 0644 $(WGPU_CACHE)/$(WGPU_SO) $(WEBGPU_LIBDIR)/$(WGPU_SO); \
	touch $(WGPU_CACHE)/ok; echo "installed $(WEBGPU_LIBDIR)/$(WGPU_SO) from wgpu $(WGPU_VERSION)"

# libvulkan1 plus Mesa's Vulkan drivers >= $(MESA_MIN). The backports suite
# reuses the URI of the machine's own Debian source (a mirror or snapshot).
deps-vulkan:
	@set -e; \
	ver=$$(dpkg-query -W -f='$${Version}' mesa-vulkan-drivers 2>/dev/null || true); \
	major=$$(echo "$$ver" | sed -E 's/^([0-9]+:)?([0-9]+).*/\2/'); \
	if dpkg -s libvulkan1 >/dev/null 2>&1 && [ -n "$$major" ] && [ "$$major" -ge $(MESA_MIN) ]; then exit 0; fi; \
	codename=$$(. /etc/os-release && echo $$VERSION_CODENAME); \
	distro=$$(. /etc/os-release && echo $$ID); \
	if [ "$$distro" != debian ]; then \
		apt-get update -qq; \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libvulkan1 mesa-vulkan-drivers; \
		echo "mesa-vulkan-drivers $$(dpkg-query -W -f='$${Version}' mesa-vulkan-drivers) (Dawn needs >= $(MESA_MIN) for lavapipe)"; \
		exit 0; \
	fi; \
	sh mk/add-backports.sh; \
	apt-get update -qq; \
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libvulkan1; \
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq -t $$codename-backports mesa-vulkan-drivers; \
	ver=$$(dpkg-query -W -f='$${Version}' mesa-vulkan-drivers); \
	echo "mesa-vulkan-drivers $$ver"

install-webgpu:
	@if [ -f $(DAWN_CACHE)/package/$(DAWN_SO) ]; then \
		install -D -m 0644 $(DAWN_CACHE)/package/$(DAWN_SO) $(DESTDIR)$(WEBGPU_LIBDIR)/$(DAWN_SO); \
	fi
	@if [ -f $(WGPU_CACHE)/$(WGPU_SO) ]; then \
		install -D -m 0644 $(WGPU_CACHE)/$(WGPU_SO) $(DESTDIR)$(WEBGPU_LIBDIR)/$(WGPU_SO); \
	fi

uninstall-webgpu:
	rm -f $(DESTDIR)$(WEBGPU_LIBDIR)/$(DAWN_SO) $(DESTDIR)$(WEBGPU_LIBDIR)/$(WGPU_SO)
	-rmdir $(DESTDIR)$(WEBGPU_LIBDIR) 2>/dev/null

# Everything the GPU machine needs for the suite and the benchmarks, in
# .carry/webgpu (git-ignored): the test binary, Dawn, the Vulkan loader and
# glvnd debs (the NVIDIA ICD needs them), wgpu-native, the lz4 wheel for the reference
# decoder, and the run script. There: bash .carry/webgpu/gpu-run.sh
WEBGPU_CARRY := .carry/webgpu
APT_AMD64 := -oAPT::Architecture=amd64 -oAPT::Architectures=amd64 -oDir::State::Lists=/tmp/amd64
.PHONY: webgpu-carry
webgpu-carry: deps-dawn deps-wgpu
	mkdir -p $(WEBGPU_CARRY)/debs $(WEBGPU_CARRY)/whl /tmp/amd64/partial
	$(GO) test -c -o $(WEBGPU_CARRY)/webgpu.test ./backends/webgpu
	cp $(DAWN_CACHE)/package/$(DAWN_SO) $(WGPU_CACHE)/$(WGPU_SO) backends/webgpu/testdata/gpu-run.sh backends/webgpu/testdata/dumppages.py $(WEBGPU_CARRY)/
	apt-get $(APT_AMD64) update -qq
	cd $(WEBGPU_CARRY)/debs && apt-get $(APT_AMD64) download libvulkan1 libglvnd0 libglx0 libegl1 libgl1 libgles2 libopengl0
	python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
		--platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d $(WEBGPU_CARRY)/whl lz4

# `make test` runs the webgpu suite with the subgroup kernel where the
# adapter offers subgroups (lavapipe does); this runs it again with the
# workgroup-memory fallback forced, so CI covers both kernels.
.PHONY: test-webgpu-fallback
test: test-webgpu-fallback
test-webgpu-fallback: deps
	S4D_WEBGPU_NO_SUBGROUPS=1 $(GO) test -count=1 ./backends/webgpu

# The whole suite again on wgpu-native (subgroup kernel where offered),
# so CI covers both implementations; ~20 s on lavapipe. REQUIRE makes a
# missing library fail rather than skip.
.PHONY: test-webgpu-wgpu
test: test-webgpu-wgpu
test-webgpu-wgpu: deps
	S4D_WEBGPU_LIB=$(WEBGPU_LIBDIR)/$(WGPU_SO) S4D_REQUIRE_WEBGPU=1 $(GO) test -count=1 ./backends/webgpu

# Issue 29's one-call runs on the GPU machine (testdata/issue29.sh,
# ceil.sh, ceil2.sh): the
# webgpu carry's libraries and debs, the test binary, s4d, the page
# dumper and the live-process holder, large files xz'd. A webgpu-old.test
# or s4d-old put there by hand is run as the "before".
WGSL_CARRY := .carry/wgsl
.PHONY: wgsl-carry
wgsl-carry: webgpu-carry
	mkdir -p $(WGSL_CARRY)
	cp -r $(WEBGPU_CARRY)/debs $(WEBGPU_CARRY)/whl $(WGSL_CARRY)/
	cp backends/webgpu/testdata/issue29.sh backends/webgpu/testdata/ceil.sh backends/webgpu/testdata/ceil2.sh backends/webgpu/testdata/dumppages.py backends/webgpu/testdata/holdpages.py $(WGSL_CARRY)/
	$(GO) test -c -o $(WGSL_CARRY)/webgpu.test ./backends/webgpu
	$(GO) build -o $(WGSL_CARRY)/s4d ./cmd/s4d
	for f in webgpu.test s4d; do xz -T2 -f $(WGSL_CARRY)/$$f; done
	for f in $(DAWN_CACHE)/package/$(DAWN_SO) $(WGPU_CACHE)/$(WGPU_SO); do xz -T2 -c $$f > $(WGSL_CARRY)/$$(basename $$f).xz; done
