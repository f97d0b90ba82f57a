package backends

import (
	"os"
	"strconv"
)

// Tuning holds the engines' knobs for comparisons and kernel work: not
// settings a user needs, so not in the daemon's settings table. They are
// read from the environment in one place, FromEnv, which the daemon, the
// bench and the engines' tests call; the engines read only Options. Zero
// values leave the engine's own choice.
type Tuning struct {
	CUDASlots         int    // S4D_CUDA_SLOTS: pieces in flight (1-64)
	CUDASlotMiB       int    // S4D_CUDA_SLOT_MIB: MiB of pages per piece (1-1024)
	CUDANvcompLZ4     bool   // S4D_CUDA_LZ4=nvcomp: LZ4 by nvCOMP even where s4d_lz4 applies
	CUDASharedUploads bool   // S4D_CUDA_SERIAL_UP=0: pieces' uploads share the link
	CUDAPTX           string // S4D_CUDA_PTX: the kernels from this PTX file, not the built-in ones
	WebGPUToggles     string // S4D_WEBGPU_TOGGLES: Dawn's device toggles, comma-separated, "-" for none
}

// FromEnv returns o completed from the environment where o leaves a field
// empty: the libraries' paths (S4D_WEBGPU_LIB, S4D_NVCOMP_LIB, which the
// daemon's settings read too) and the Tuning.
func FromEnv(o Options) Options {
	str := func(dst *string, env string) {
		if *dst == "" {
			*dst = os.Getenv(env)
		}
	}
	num := func(dst *int, env string, hi int) {
		if v, err := strconv.Atoi(os.Getenv(env)); *dst == 0 && err == nil && v > 0 && v <= hi {
			*dst = v
		}
	}
	str(&o.WebGPULib, "S4D_WEBGPU_LIB")
	str(&o.NvcompLib, "S4D_NVCOMP_LIB")
	str(&o.WGSLRuntime, "S4D_WGSL_RUNTIME")
	t := &o.Tuning
	num(&t.CUDASlots, "S4D_CUDA_SLOTS", 64)
	num(&t.CUDASlotMiB, "S4D_CUDA_SLOT_MIB", 1024)
	t.CUDANvcompLZ4 = t.CUDANvcompLZ4 || os.Getenv("S4D_CUDA_LZ4") == "nvcomp"
	t.CUDASharedUploads = t.CUDASharedUploads || os.Getenv("S4D_CUDA_SERIAL_UP") == "0"
	str(&t.CUDAPTX, "S4D_CUDA_PTX")
	str(&t.WebGPUToggles, "S4D_WEBGPU_TOGGLES")
	return o
}
