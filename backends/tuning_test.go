package backends

import "testing"

func TestFromEnv(t *testing.T) {
	t.Setenv("S4D_CUDA_SLOTS", "12")
	t.Setenv("S4D_CUDA_SLOT_MIB", "4096") // over the bound: left to the engine
	t.Setenv("S4D_CUDA_LZ4", "nvcomp")
	t.Setenv("S4D_CUDA_SERIAL_UP", "0")
	t.Setenv("S4D_CUDA_PTX", "/tmp/k.ptx")
	t.Setenv("S4D_NVCOMP_LIB", "/env/libnvcomp.so.6")
	o := FromEnv(Options{NvcompLib: "/flag/libnvcomp.so.6"})
	want := Tuning{CUDASlots: 12, CUDANvcompLZ4: true, CUDASharedUploads: true, CUDAPTX: "/tmp/k.ptx"}
	if o.Tuning != want {
		t.Errorf("tuning %+v, want %+v", o.Tuning, want)
	}
	if o.NvcompLib != "/flag/libnvcomp.so.6" {
		t.Errorf("the environment overrode an explicit path: %q", o.NvcompLib)
	}
	if o := FromEnv(Options{Tuning: Tuning{CUDASlots: 3}}); o.Tuning.CUDASlots != 3 {
		t.Errorf("the environment overrode an explicit tuning: %d", o.Tuning.CUDASlots)
	}
}
