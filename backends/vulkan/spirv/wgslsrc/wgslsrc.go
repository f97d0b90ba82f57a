// Package wgslsrc gives the WGSL each SPIR-V module of package spirv is
// compiled from (apart from spirv so that the generators build before
// the modules they make exist).
package wgslsrc

import (
	"crypto/sha256"
	"fmt"
	"strings"

	"github.com/s4d-project/s4d/wgsl"
)

// Variant is one kernel as a compiler takes it.
type Variant struct {
	Name string // the .wgsl / .spv file name without extension
	WGSL string
}

// EngineDepth is the chain depth the WGSL engine runs by default
// (backends/webgpu's defaultChainDepth: faster than pagelz4's 6, at a
// slightly lower ratio). The Vulkan runtime runs the same kernels as the
// webgpu one, so its modules use it too; compress_exact keeps pagelz4's
// depth so that tests can compare bytes with pagelz4.
const EngineDepth = 2

// TintVariants returns the WGSL each of Tint's modules is compiled from:
// the kernels' constants set for 4 KiB pages, exactly as the webgpu
// runtime hands them to Dawn (compress_sg with `enable subgroups;`).
func TintVariants() []Variant {
	return []Variant{
		{"compress", wgsl.Source(wgsl.Compress, wgsl.Params{PageWords: 1024, Depth: EngineDepth})},
		{"compress_sg", wgsl.Source(wgsl.Compress, wgsl.Params{PageWords: 1024, Subgroups: true, Depth: EngineDepth})},
		{"compress_exact", wgsl.Source(wgsl.Compress, wgsl.Params{PageWords: 1024, Depth: wgsl.PagelzDepth})},
		{"decompress", wgsl.Source(wgsl.Decompress, wgsl.Params{PageWords: 1024})},
		{"gather", wgsl.Source(wgsl.Gather, wgsl.Params{PageWords: 1024})},
	}
}

// Variants returns the WGSL each of naga's modules is compiled from: Tint's,
// except that naga (30.0.1, like wgpu-native's) rejects the `enable
// subgroups;` directive as not implemented yet takes the subgroup
// builtins, so the directive is left out, as the webgpu runtime does for
// wgpu-native.
func Variants() []Variant {
	v := TintVariants()
	for i := range v {
		v[i].WGSL = strings.Replace(v[i].WGSL, "enable subgroups;", "", 1)
	}
	return v
}

// TintToggles are the Dawn device toggles Tint's modules are generated
// under: the webgpu runtime's defaults (backends/webgpu's defaultToggles,
// checked there), so that the Vulkan runtime runs the code Dawn runs. The
// kernels index only within their arrays and zero the workgroup memory
// they read first: no bounds clamps, no workgroup-memory zeroing.
const TintToggles = "disable_robustness,disable_workgroup_init"

// TintInputs is the inputs.sha256 of Tint's modules: the hashes of their
// WGSL, then the toggles and the Dawn package they were generated with.
func TintInputs(dawn string) string {
	var b strings.Builder
	for _, v := range TintVariants() {
		fmt.Fprintf(&b, "%x  %s.wgsl\n", sha256.Sum256([]byte(v.WGSL)), v.Name)
	}
	fmt.Fprintf(&b, "# dawn toggles: %s\n# dawn: %s\n", TintToggles, dawn)
	return b.String()
}
