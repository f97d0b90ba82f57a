// Package wgslsrc gives the WGSL each SPIR-V module of package spirv is
// compiled from (apart from spirv so that the generator builds before
// the modules it makes exist).
package wgslsrc

import (
	"strings"

	"github.com/s4d-project/s4d/wgsl"
)

// Variant is one kernel as naga compiles it.
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

// Variants returns the WGSL each module is compiled from: the kernels'
// constants set for 4 KiB pages. Naga (30.0.1, like wgpu-native's)
// rejects the `enable subgroups;` directive as not implemented yet takes
// the subgroup builtins, so the directive is left out, as the webgpu
// runtime does for wgpu-native.
func Variants() []Variant {
	sg := wgsl.Source(wgsl.Compress, wgsl.Params{PageWords: 1024, Subgroups: true, Depth: EngineDepth})
	return []Variant{
		{"compress", wgsl.Source(wgsl.Compress, wgsl.Params{PageWords: 1024, Depth: EngineDepth})},
		{"compress_sg", strings.Replace(sg, "enable subgroups;", "", 1)},
		{"compress_exact", wgsl.Source(wgsl.Compress, wgsl.Params{PageWords: 1024, Depth: wgsl.PagelzDepth})},
		{"decompress", wgsl.Source(wgsl.Decompress, wgsl.Params{PageWords: 1024})},
	}
}
