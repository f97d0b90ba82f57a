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
