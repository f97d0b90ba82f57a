// Package spirv holds the WGSL engine's kernels compiled to SPIR-V for
// the Vulkan runtime of issue 41: the WGSL in wgsl/ stays the one source;
// these are generated from it by `make vulkan-spirv` with a pinned naga
// (naga-cli, see mk/vulkan.mk) and committed, like ptx/s4d.ptx.
//
// TestInputsCurrent fails when wgsl/ changes without the SPIR-V being
// regenerated; `make vulkan-spirv-check` rebuilds the modules and compares
// them byte for byte.
package spirv

import _ "embed"

// The kernels for 4 KiB pages.
var (
	//go:embed compress.spv
	Compress []byte // classify + LZ4 at the engine's chain depth, workgroup-memory prefix sums
	//go:embed compress_sg.spv
	CompressSubgroups []byte // the same with subgroup prefix sums (needs subgroup arithmetic)
	//go:embed compress_exact.spv
	CompressExact []byte // pagelz4's chain depth: pagelz4's bytes, for tests
	//go:embed decompress.spv
	Decompress []byte
)
