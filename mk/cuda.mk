# CUDA backend: PTX kernels (generated with nvcc, committed) and nvCOMP
# (from NVIDIA's PyPI wheel; the backend finds it at run time).
NVCC          ?= nvcc
# PTX for compute capability 7.5 is JIT-compiled by the driver for any
# newer GPU (Turing, Ampere, Ada, Hopper, Blackwell).
PTX_ARCH      ?= compute_75
NVCOMP_WHEEL  ?= nvidia-libnvcomp-cu13==6.0.0.12
NVCOMP_LIBDIR ?= /usr/local/lib/s4d
NVCOMP_CACHE  := .deps/nvcomp
CUDA_CARRY    := .carry/cuda
PIP_WHEEL     := python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 \
	--implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
	--platform manylinux_2_24_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64

.PHONY: ptx nvcomp-wheel nvcc-wheel install-nvcomp uninstall-nvcomp cuda-carry

# Needs nvcc (the CUDA toolkit); the result is committed.
ptx: ptx/s4d.ptx
ptx/s4d.ptx: ptx/s4d.cu ptx/s4d_read.cuh ptx/s4d_place.cuh
	$(NVCC) -ptx -arch=$(PTX_ARCH) -O3 -o $@ $<

# Downloads the nvCOMP wheel and unpacks libnvcomp.so.N next to it.
nvcomp-wheel:
	mkdir -p $(NVCOMP_CACHE)
	$(PIP_WHEEL) -d $(NVCOMP_CACHE) '$(NVCOMP_WHEEL)'
	cd $(NVCOMP_CACHE) && python3 -c 'import glob, zipfile; z = zipfile.ZipFile(sorted(glob.glob("nvidia_libnvcomp_*.whl"))[-1]); \
		[open(n.rsplit("/", 1)[1], "wb").write(z.read(n)) for n in z.namelist() if "/lib64/libnvcomp.so." in n]'
	ls $(NVCOMP_CACHE)/libnvcomp.so.*

# Installs libnvcomp where the daemon looks after the loader's own paths.
install-nvcomp: nvcomp-wheel
	install -D -m 0644 $$(ls $(NVCOMP_CACHE)/libnvcomp.so.* | sort | tail -n 1) -t $(NVCOMP_LIBDIR)

uninstall-nvcomp:
	rm -f $(NVCOMP_LIBDIR)/libnvcomp.so.*

# What backends/cuda/gpu-check.sh needs on a GPU machine with no Go and no
# network: the test binary, the nvCOMP wheel, and the reference decoders
# the conformance suite runs (python lz4 for C liblz4, Debian's zstd).
cuda-carry:
	mkdir -p $(CUDA_CARRY)/deb
	$(GO) test -c -o $(CUDA_CARRY)/cuda.test ./backends/cuda
	ls $(CUDA_CARRY)/nvidia_libnvcomp_*.whl >/dev/null 2>&1 || $(PIP_WHEEL) -d $(CUDA_CARRY) '$(NVCOMP_WHEEL)'
	ls $(CUDA_CARRY)/lz4-*.whl >/dev/null 2>&1 || $(PIP_WHEEL) -d $(CUDA_CARRY) lz4
	ls $(CUDA_CARRY)/deb/zstd_*.deb >/dev/null 2>&1 || (cd $(CUDA_CARRY)/deb && apt-get download zstd libzstd1)
	$(GO) build -o $(CUDA_CARRY)/s4d ./cmd/s4d

# Issue 31's one-call run on a host with several GPUs
# (backends/cuda/multi-gpu.sh, then `bash .carry/multigpu/multi-gpu.sh`):
# the cuda suite and an s4d built with the router's fault injection
# (inert unless S4D_FAULT_DIR is set), a plain s4d, and the wheels and
# debs cuda-carry fetches; the binaries xz'd to fit one call.
MULTIGPU_CARRY := .carry/multigpu
.PHONY: multigpu-carry
multigpu-carry: cuda-carry
	mkdir -p $(MULTIGPU_CARRY)
	cp -r $(CUDA_CARRY)/deb $(CUDA_CARRY)/nvidia_libnvcomp_*.whl $(CUDA_CARRY)/lz4-*.whl backends/cuda/multi-gpu.sh $(MULTIGPU_CARRY)/
	$(GO) test -c -tags s4dfault -o $(MULTIGPU_CARRY)/cuda.test ./backends/cuda
	$(GO) build -ldflags='-s -w' -o $(MULTIGPU_CARRY)/s4d ./cmd/s4d
	$(GO) build -tags s4dfault -ldflags='-s -w' -o $(MULTIGPU_CARRY)/s4d-fault ./cmd/s4d
	xz -T2 -f $(MULTIGPU_CARRY)/s4d $(MULTIGPU_CARRY)/s4d-fault

# nvcc from NVIDIA's PyPI wheels (the version the committed PTX was made
# with), for make ptx on a machine without the CUDA toolkit.
NVCC_WHEELS := nvidia-cuda-nvcc==13.0.88 nvidia-nvvm==13.0.88 nvidia-cuda-crt==13.0.88 nvidia-cuda-runtime==13.0.96
NVCC_ROOT   := .deps/nvcc
nvcc-wheel:
	mkdir -p $(NVCC_ROOT)
	python3 -m pip download --no-deps --only-binary=:all: -d $(NVCC_ROOT) $(NVCC_WHEELS)
	cd $(NVCC_ROOT) && for w in *.whl; do python3 -m zipfile -e $$w root; done
	chmod +x $(NVCC_ROOT)/root/nvidia/cu13/bin/* $(NVCC_ROOT)/root/nvidia/cu13/nvvm/bin/*
	@echo "make ptx NVCC=$(NVCC_ROOT)/root/nvidia/cu13/bin/nvcc"
