// Package spirv holds the WGSL engine's kernels compiled to SPIR-V for
// the Vulkan runtime of issue 41: the WGSL in wgsl/ stays the one source;
// the modules are generated from it and committed, like ptx/s4d.ptx, by
// two pinned compilers:
//   - naga (naga-cli 30.0.1, `make vulkan-spirv`), the files in this folder;
//   - Tint, as Dawn (the npm package `make deps` installs) generates it on
//     Vulkan with the webgpu runtime's toggles (`make vulkan-spirv-tint`),
//     the files in tint/.
//
// TestInputsCurrent fails when wgsl/ changes without the SPIR-V being
// regenerated; `make vulkan-spirv-check` and `make vulkan-spirv-tint-check`
// rebuild the modules and compare them byte for byte.
package spirv

import (
	_ "embed"
	"fmt"
	"os"
)

// Set is one compiler's modules of the kernels for 4 KiB pages.
type Set struct {
	Name              string // "naga" or "tint"
	Compress          []byte // classify + LZ4 at the engine's chain depth, workgroup-memory prefix sums
	CompressSubgroups []byte // the same with subgroup prefix sums (needs subgroup arithmetic)
	CompressExact     []byte // pagelz4's chain depth: pagelz4's bytes, for tests
	Decompress        []byte
	Gather            []byte // a GET's pages copied on the GPU (raw ones from the store's slabs)
	// The entry points: naga keeps the WGSL's names, Dawn has Tint name
	// every entry point dawn_entry_point.
	CompressEntry, DecompressEntry, GatherEntry string
}

var (
	//go:embed compress.spv
	nagaCompress []byte
	//go:embed compress_sg.spv
	nagaCompressSG []byte
	//go:embed compress_exact.spv
	nagaCompressExact []byte
	//go:embed decompress.spv
	nagaDecompress []byte
	//go:embed gather.spv
	nagaGather []byte

	//go:embed tint/compress.spv
	tintCompress []byte
	//go:embed tint/compress_sg.spv
	tintCompressSG []byte
	//go:embed tint/compress_exact.spv
	tintCompressExact []byte
	//go:embed tint/decompress.spv
	tintDecompress []byte
	//go:embed tint/gather.spv
	tintGather []byte
)

// Naga's modules: bounds checks Restrict (indices clamped), as wgpu
// applies them on Vulkan.
var Naga = Set{"naga", nagaCompress, nagaCompressSG, nagaCompressExact, nagaDecompress, nagaGather, "compress", "decompress", "gather"}

// Tint's modules, as Dawn runs them for the webgpu runtime: no bounds
// clamps, no workgroup-memory zeroing (wgslsrc.TintToggles).
var Tint = Set{"tint", tintCompress, tintCompressSG, tintCompressExact, tintDecompress, tintGather, "dawn_entry_point", "dawn_entry_point", "dawn_entry_point"}

// Sets lists both compilers' modules.
func Sets() []Set { return []Set{Tint, Naga} }

// EnvCompiler picks the modules the Vulkan runtime runs: "tint" or "naga".
const EnvCompiler = "S4D_VULKAN_SPIRV"

// Default is the set the runtime runs unless EnvCompiler says otherwise:
// Tint's. On an H200 its compress kernel ran 1.5x naga's (15.3 against
// 10.1 GB/s), its decompress kernel 1.15x, and the daemon's PUT 1.3-1.6x
// (docs/benchmarks/2026-12-02-vulkan-tint.md); lavapipe also compiles it
// in under a minute where naga's compress module takes many. Naga's
// modules keep their index clamps (Restrict); Tint's have none, as Dawn
// runs them for the webgpu runtime.
var Default = Tint

// Selected returns the set EnvCompiler names, or Default.
func Selected() (Set, error) {
	switch v := os.Getenv(EnvCompiler); v {
	case "":
		return Default, nil
	case "naga":
		return Naga, nil
	case "tint":
		return Tint, nil
	default:
		return Set{}, fmt.Errorf("%s=%q: want tint or naga", EnvCompiler, v)
	}
}
