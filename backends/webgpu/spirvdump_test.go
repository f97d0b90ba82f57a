package webgpu

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"github.com/s4d-project/s4d/backends/vulkan/spirv"
	"github.com/s4d-project/s4d/backends/vulkan/spirv/wgslsrc"
)

// TestTintToggles: Tint's committed modules are generated under the
// toggles this runtime asks Dawn for, so both runtimes run the same code.
func TestTintToggles(t *testing.T) {
	if got := strings.Join(defaultToggles, ","); got != wgslsrc.TintToggles {
		t.Fatalf("the webgpu runtime asks Dawn for %s, Tint's modules were made under %s: run make vulkan-spirv-tint", got, wgslsrc.TintToggles)
	}
}

// TestDumpSPIRV: Dawn here (lavapipe without a GPU) logs the decompress
// kernel's module, it assembles again, and it is the committed one byte
// for byte (make vulkan-spirv-tint-check does all four; the decompress
// kernel takes a second).
func TestDumpSPIRV(t *testing.T) {
	lib := os.Getenv("S4D_WEBGPU_LIB")
	if lib == "" {
		lib = DefaultLib
	}
	if _, err := os.Stat(lib); err != nil {
		t.Skipf("webgpu library %s missing: run `make deps`", lib)
	}
	p, _, err := loadLib(lib)
	if err != nil {
		t.Skip(err)
	}
	if wgpuNative[p] {
		t.Skip("wgpu-native: dump_shaders is Dawn's")
	}
	var v wgslsrc.Variant
	for _, x := range wgslsrc.TintVariants() {
		if x.Name == "decompress" {
			v = x
		}
	}
	d, err := DumpSPIRV(lib, DefaultToggles(), []DumpKernel{{Name: v.Name, WGSL: v.WGSL, Entry: "decompress"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s", d.Device)
	m, err := AssembleDump(lib, d.Text["decompress"], "vulkan1.2")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(m, spirv.Tint.Decompress) {
		t.Fatalf("Tint's decompress module here (%d bytes) differs from the committed one (%d bytes): run make vulkan-spirv-tint", len(m), len(spirv.Tint.Decompress))
	}
}
