# CUDA backend: PTX kernels (generated with nvcc, committed) and nvCOMP
# (from NVIDIA's PyPI wheel; the backend finds it at run time).
NVCC          ?= nvcc
# PTX for compute capability 7.5 is JIT-compiled by the driver for any
# newer GPU (Turing, Ampere, Ada, Hopper, Blackwell).
PTX_ARCH      ?= compute_75
NVCOMP_WHEEL  ?= nvidia-libnvcomp-cu13==6.0.0.12
NVCOMP_LIBDIR ?= /usr/local/lib/s4d
CUDA_CARRY    := .carry/cuda
PIP_WHEEL_FLAGS := --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
	--platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_24_x86_64

.PHONY: ptx nvcomp-wheel install-nvcomp uninstall-nvcomp cuda-test-binary

# Needs nvcc (the CUDA toolkit); the result is committed.
ptx: ptx/s4d.ptx
ptx/s4d.ptx: ptx/s4d.cu
	$(NVCC) -ptx -arch=$(PTX_ARCH) -O3 -o $@ $<

# Downloads the nvCOMP wheel and unpacks libnvcomp.so.N next to it.
nvcomp-wheel:
	mkdir -p $(CUDA_CARRY)
	python3 -m pip download $(PIP_WHEEL_FLAGS) -d $(CUDA_CARRY) '$(NVCOMP_WHEEL)'
	cd $(CUDA_CARRY) && unzip -o -j nvidia_libnvcomp_*.whl 'nvidia/libnvcomp/lib64/libnvcomp.so.*' -x '*_cpu*'

# Installs libnvcomp where the daemon looks first.
install-nvcomp: nvcomp-wheel
	install -D -m 0644 $$(ls $(CUDA_CARRY)/libnvcomp.so.* | sort | tail -n 1) -t $(NVCOMP_LIBDIR)

uninstall-nvcomp:
	rm -f $(NVCOMP_LIBDIR)/libnvcomp.so.*

# The test binary, to run on a GPU machine that has no Go toolchain.
cuda-test-binary:
	mkdir -p $(CUDA_CARRY)
	$(GO) test -c -o $(CUDA_CARRY)/cuda.test ./backends/cuda
