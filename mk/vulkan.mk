# Issue 41's Vulkan spike: vkprobe, a C program that loads libvulkan at run
# time and measures host-memory import and transfers (backends/vulkan/vkprobe).
# Not part of `make test`: it needs the Vulkan headers (libvulkan-dev) to
# build, and its lavapipe check only shows that import works.
VKPROBE_SRC   := backends/vulkan/vkprobe
VKPROBE       := bin/vkprobe
VKPROBE_CARRY := .carry/vkprobe
CC            ?= cc

.PHONY: vkprobe vkprobe-check vkprobe-carry vkprobe-spirv

vkprobe: $(VKPROBE)
$(VKPROBE): $(wildcard $(VKPROBE_SRC)/*.c $(VKPROBE_SRC)/*.h)
	@[ -f /usr/include/vulkan/vulkan.h ] || { echo "vkprobe needs the Vulkan headers: apt-get install libvulkan-dev" >&2; exit 1; }
	@mkdir -p $(dir $@)
	$(CC) -O2 -Wall -Wextra -std=gnu11 -o $@ $(filter %.c,$^) -ldl -lpthread

# The gather shader's SPIR-V, committed as a C array (the probe builds without
# glslang); regenerate after editing gather.comp.
vkprobe-spirv:
	glslangValidator -V --target-env vulkan1.2 --vn gather_spv -o $(VKPROBE_SRC)/gather.spv.h $(VKPROBE_SRC)/gather.comp

# A 64 MiB round trip through imported memory and through staging on
# whatever Vulkan device is here (lavapipe without a GPU); ~1 s. Skips
# (exit 0, says so) without libvulkan or a device; fails on a wrong round trip.
vkprobe-check: $(VKPROBE)
	@set +e; $(VKPROBE) -s 64 -r 1 -q; rc=$$?; \
	if [ $$rc -eq 77 ]; then echo "vkprobe-check: skipped (no Vulkan)"; exit 0; fi; exit $$rc

# The GPU machine's carry: the probe, its run script, the CUDA reference
# and Debian's Vulkan loader with glvnd (NVIDIA's ICD needs them).
# There: bash .carry/vkprobe/gpu-run.sh
vkprobe-carry: $(VKPROBE)
	mkdir -p $(VKPROBE_CARRY)/debs /tmp/amd64/partial
	cp $(VKPROBE) $(VKPROBE_SRC)/gpu-run.sh $(VKPROBE_SRC)/cudaref.py $(VKPROBE_CARRY)/
	apt-get -oAPT::Architecture=amd64 -oAPT::Architectures=amd64 -oDir::State::Lists=/tmp/amd64 update -qq
	cd $(VKPROBE_CARRY)/debs && apt-get -oAPT::Architecture=amd64 -oAPT::Architectures=amd64 -oDir::State::Lists=/tmp/amd64 \
		download libvulkan1 libglvnd0 libglx0 libegl1 libgl1 libgles2 libopengl0

# The WGSL kernels compiled to SPIR-V for issue 41's Vulkan runtime, with a
# pinned naga (naga-cli from crates.io, built with cargo --locked into
# .deps/naga; a few minutes once). Bounds checks as wgpu applies them on
# Vulkan (Restrict: an index past the end is clamped, never a stray
# access); SPIR-V 1.3 for the subgroup operations. The modules and the
# hashes of the WGSL they came from are committed (backends/vulkan/spirv);
# TestInputsCurrent catches a stale one without naga, and
# vulkan-spirv-check rebuilds them and compares byte for byte.
NAGA_VERSION := 30.0.1
NAGA         := .deps/naga/bin/naga
NAGA_FLAGS   := --spirv-version 1.3 --index-bounds-check-policy Restrict --buffer-bounds-check-policy Restrict
SPIRV_DIR    := backends/vulkan/spirv
SPIRV_MODS   := compress compress_sg compress_exact decompress gather

.PHONY: vulkan-spirv vulkan-spirv-check
$(NAGA):
	cargo install naga-cli --version $(NAGA_VERSION) --locked --root $(CURDIR)/.deps/naga

# spirv_build DIR: the modules and inputs.sha256 into DIR.
define spirv_build
	@set -e; w=$$(mktemp -d); trap 'rm -rf $$w' EXIT; \
	$(GO) run ./$(SPIRV_DIR)/wgslgen $$w; \
	for k in $(SPIRV_MODS); do \
		$(NAGA) $(NAGA_FLAGS) $$w/$$k.wgsl $(1)/$$k.spv; \
		if command -v spirv-val >/dev/null; then spirv-val --target-env vulkan1.2 $(1)/$$k.spv; fi; \
	done; \
	cp $$w/inputs.sha256 $(1)/inputs.sha256
endef

vulkan-spirv: $(NAGA)
	$(call spirv_build,$(SPIRV_DIR))
	@echo "regenerated $(SPIRV_DIR)/*.spv with naga $(NAGA_VERSION)"

vulkan-spirv-check: $(NAGA)
	@set -e; d=$$(mktemp -d); trap 'rm -rf $$d' EXIT; \
	$(MAKE) --no-print-directory vulkan-spirv-into SPIRV_OUT=$$d; \
	for f in $(addsuffix .spv,$(SPIRV_MODS)) inputs.sha256; do \
		cmp $$d/$$f $(SPIRV_DIR)/$$f || { echo "$(SPIRV_DIR)/$$f differs from naga $(NAGA_VERSION)'s: run make vulkan-spirv" >&2; exit 1; }; \
	done; echo "$(SPIRV_DIR): current"

.PHONY: vulkan-spirv-into
vulkan-spirv-into: $(NAGA)
	$(call spirv_build,$(SPIRV_OUT))

# The same kernels compiled by Tint, as Dawn runs them on Vulkan for the
# webgpu runtime (backends/vulkan/spirv/tintgen): Dawn (the pinned npm
# package of deps-dawn) opens a device on this machine's Vulkan driver
# (lavapipe without a GPU: deps-vulkan) with the webgpu runtime's toggles
# plus dump_shaders, and logs each module Tint generated as disassembly;
# the SPIRV-Tools inside the same library assemble it again (checked to
# disassemble to the same text) and validate it. Seconds, no GPU. Tint's
# output depends on the device only through toggles (README).
TINT_SPIRV_DIR := $(SPIRV_DIR)/tint
.PHONY: vulkan-spirv-tint vulkan-spirv-tint-check vulkan-spirv-tint-into
vulkan-spirv-tint: deps-dawn
	$(MAKE) --no-print-directory vulkan-spirv-tint-into TINT_OUT=$(TINT_SPIRV_DIR)
	@echo "regenerated $(TINT_SPIRV_DIR)/*.spv with Tint from $(DAWN_NPM)"

vulkan-spirv-tint-into:
	S4D_WEBGPU_ALLOW_CPU=1 $(GO) run ./$(SPIRV_DIR)/tintgen -dawn $(DAWN_NPM) $(DAWN_CACHE)/package/$(DAWN_SO) $(TINT_OUT)

vulkan-spirv-tint-check: deps-dawn
	@set -e; d=$$(mktemp -d); trap 'rm -rf $$d' EXIT; \
	$(MAKE) --no-print-directory vulkan-spirv-tint-into TINT_OUT=$$d >/dev/null; \
	for f in $(addsuffix .spv,$(SPIRV_MODS)) inputs.sha256; do \
		cmp $$d/$$f $(TINT_SPIRV_DIR)/$$f || { echo "$(TINT_SPIRV_DIR)/$$f differs from Tint's ($(DAWN_NPM)): run make vulkan-spirv-tint" >&2; exit 1; }; \
	done; echo "$(TINT_SPIRV_DIR): current"

# The vk package's tests and BenchmarkCompress on the GPU machine:
# .carry/vulkan (git-ignored) gets the test binary, the run script and
# the Vulkan loader debs. There: bash .carry/vulkan/gpu-run.sh
VULKAN_CARRY := .carry/vulkan
.PHONY: vulkan-carry
vulkan-carry: vkprobe-carry
	mkdir -p $(VULKAN_CARRY)/debs
	$(GO) test -c -o $(VULKAN_CARRY)/vk.test ./backends/vulkan/vk
	cp backends/vulkan/vk/testdata/gpu-run.sh $(VULKAN_CARRY)/
	cp $(VKPROBE_CARRY)/debs/*.deb $(VULKAN_CARRY)/debs/

# Issue 41 step 2 on the GPU machine (backends/webgpu/testdata/vulkan-runtime.sh):
# .carry/vkrt gets the webgpu, all and vk test binaries and s4d (xz'd), the
# Vulkan loader debs, the nvCOMP wheel (the cuda row) and the lz4 wheel.
# There: bash .carry/vkrt/vulkan-runtime.sh
VKRT_CARRY := .carry/vkrt
.PHONY: vulkan-runtime-carry
vulkan-runtime-carry: vulkan-carry
	mkdir -p $(VKRT_CARRY)/debs $(VKRT_CARRY)/whl
	cp $(VULKAN_CARRY)/debs/*.deb $(VKRT_CARRY)/debs/
	cp backends/webgpu/testdata/vulkan-runtime.sh $(VKRT_CARRY)/
	$(GO) test -c -o $(VKRT_CARRY)/webgpu.test ./backends/webgpu
	$(GO) test -c -o $(VKRT_CARRY)/all.test ./backends/all
	$(GO) test -c -o $(VKRT_CARRY)/vk.test ./backends/vulkan/vk
	$(GO) build -ldflags='-s -w' -o $(VKRT_CARRY)/s4d ./cmd/s4d
	for f in webgpu.test all.test vk.test s4d; do xz -T2 -f $(VKRT_CARRY)/$$f; done
	ls $(VKRT_CARRY)/nvidia_libnvcomp_*.whl >/dev/null 2>&1 || $(PIP_WHEEL) -d $(VKRT_CARRY) '$(NVCOMP_WHEEL)'
	ls $(VKRT_CARRY)/whl/lz4-*.whl >/dev/null 2>&1 || $(PIP_WHEEL) -d $(VKRT_CARRY)/whl lz4

# Tint's modules beside naga's on the GPU machine
# (backends/vulkan/vk/testdata/tint-run.sh): .carry/vktint gets the vk and
# webgpu test binaries, s4d and tintgen (xz'd), Dawn, the Vulkan loader
# debs and the lz4 wheel. There: bash .carry/vktint/tint-run.sh
VKTINT_CARRY := .carry/vktint
.PHONY: vulkan-tint-carry
vulkan-tint-carry: deps-dawn
	mkdir -p $(VKTINT_CARRY)/debs $(VKTINT_CARRY)/whl /tmp/amd64/partial
	cp backends/vulkan/vk/testdata/tint-run.sh $(VKTINT_CARRY)/
	$(GO) test -c -o $(VKTINT_CARRY)/webgpu.test ./backends/webgpu
	$(GO) test -c -o $(VKTINT_CARRY)/vk.test ./backends/vulkan/vk
	$(GO) build -ldflags='-s -w' -o $(VKTINT_CARRY)/s4d ./cmd/s4d
	$(GO) build -ldflags='-s -w' -o $(VKTINT_CARRY)/tintgen ./$(SPIRV_DIR)/tintgen
	cp $(DAWN_CACHE)/package/$(DAWN_SO) $(VKTINT_CARRY)/
	for f in webgpu.test vk.test s4d tintgen $(DAWN_SO); do xz -T2 -f $(VKTINT_CARRY)/$$f; done
	ls $(VKTINT_CARRY)/debs/libvulkan1_*.deb >/dev/null 2>&1 || { apt-get $(APT_AMD64) update -qq; \
		cd $(VKTINT_CARRY)/debs && apt-get $(APT_AMD64) download libvulkan1 libglvnd0 libglx0 libegl1 libgl1 libgles2 libopengl0; }
	ls $(VKTINT_CARRY)/whl/lz4-*.whl >/dev/null 2>&1 || python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
		--implementation cp --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d $(VKTINT_CARRY)/whl lz4

# The Vulkan runtime's kernels on lavapipe, so CI covers them: the
# engine's round trips, imports and staging, its fallback when imports
# are refused, the raw-page skip against the webgpu.h runtime,
# FuzzDifferential's seeds with the Vulkan engine among the engines (C
# liblz4 decodes its pages), and the daemon on it. `go test ./...` skips
# these on a CPU device; lavapipe compiles Tint's modules at the first
# dispatch, about 80 s in all with Mesa's shader cache empty, 35 s
# with it filled. REQUIRE turns a missing Vulkan into a failure.
.PHONY: test-vulkan-kernels
test: test-vulkan-kernels
test-vulkan-kernels: deps
	S4D_VULKAN_KERNELS=1 S4D_REQUIRE_VULKAN=1 $(GO) test -count=1 -run 'TestVulkan|TestAuto|TestRawSkip' ./backends/webgpu
	S4D_VULKAN_KERNELS=1 S4D_REQUIRE_VULKAN=1 $(GO) test -count=1 -run '^FuzzDifferential$$' ./backends/all
	S4D_VULKAN_KERNELS=1 S4D_REQUIRE_VULKAN=1 $(GO) test -count=1 -run '^TestVulkanRuntime(Daemon|DeviceLost)$$' ./tests
