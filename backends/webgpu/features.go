package webgpu

/*
#include "glue.h"
*/
import "C"

import (
	"fmt"
	"strings"
)

// The adapter's features, asked one value at a time with
// wgpuAdapterHasFeature over the ranges where webgpu.h implementations put
// them (standard 0x1..., wgpu-native's own 0x3xxxx, Dawn's 0x5xxxx): unlike
// wgpuAdapterGetFeatures this needs no struct whose layout differs between
// revisions. Issue 29 asks which of them let the GPU read and write host
// memory in place (no staging copy): Dawn's host-mapped-pointer (a buffer
// made from a host pointer) and buffer-map-extended-usages (a mappable
// buffer usable as storage), wgpu-native's mappable-primary-buffers (the
// same for its buffers; the bytes still have to be copied into them).

// standardFeatures are webgpu.h's values, the same in Dawn and wgpu-native.
var standardFeatures = map[uint32]string{
	0x01: "core-features-and-limits", 0x02: "depth-clip-control", 0x03: "depth32float-stencil8",
	0x04: "texture-compression-bc", 0x05: "texture-compression-bc-sliced-3d", 0x06: "texture-compression-etc2",
	0x07: "texture-compression-astc", 0x08: "texture-compression-astc-sliced-3d", 0x09: "timestamp-query",
	0x0A: "indirect-first-instance", 0x0B: "shader-f16", 0x0C: "rg11b10ufloat-renderable",
	0x0D: "bgra8unorm-storage", 0x0E: "float32-filterable", 0x0F: "float32-blendable",
	0x10: "clip-distances", 0x11: "dual-source-blending", 0x12: "subgroups",
	0x13: "texture-formats-tier1", 0x14: "texture-formats-tier2",
}

// dawnFeatures: Dawn's webgpu.h of 2025 (the revision whose toggles
// descriptor is 0x5000A, as in the library we ship). On lavapipe this Dawn
// offers 0x50015, 0x50017 and 0x50019, which fit the adapter-properties
// and format-capabilities features that every Vulkan adapter has.
var dawnFeatures = map[uint32]string{
	0x50000: "dawn-internal-usages", 0x50001: "dawn-multi-planar-formats", 0x50002: "dawn-native",
	0x50003: "timestamp-query-inside-passes", 0x50004: "implicit-device-synchronization",
	0x50006: "transient-attachments", 0x50007: "msaa-render-to-single-sampled",
	0x50008: "d3d11-multithread-protected", 0x50009: "angle-texture-sharing",
	0x5000A: "pixel-local-storage-coherent", 0x5000B: "pixel-local-storage-non-coherent",
	0x5000C: "unorm16-texture-formats", 0x5000D: "snorm16-texture-formats",
	0x5000E: "multi-planar-format-extended-usages", 0x5000F: "multi-planar-format-p010",
	featHostMappedPointer: "host-mapped-pointer", 0x50011: "multi-planar-render-targets",
	0x50012: "multi-planar-format-nv12a", 0x50013: "framebuffer-fetch",
	featBufferMapExtended: "buffer-map-extended-usages", 0x50015: "adapter-properties-memory-heaps",
	0x50016: "adapter-properties-d3d", 0x50017: "adapter-properties-vk", 0x50018: "r8unorm-storage",
	0x50019: "dawn-format-capabilities", 0x5001A: "dawn-drm-format-capabilities",
	0x5001B: "norm16-texture-formats",
}

// nativeFeatures: wgpu-native's WGPUNativeFeature values (wgpu.h of 0.2x).
var nativeFeatures = map[uint32]string{
	0x30001: "push-constants", 0x30002: "texture-adapter-specific-format-features",
	0x30003: "multi-draw-indirect", 0x30004: "multi-draw-indirect-count",
	0x30005: "vertex-writable-storage", 0x30006: "texture-binding-array",
	0x30007: "sampled-texture-and-storage-buffer-array-non-uniform-indexing",
	0x30008: "pipeline-statistics-query", 0x30009: "storage-resource-binding-array",
	0x3000A: "partially-bound-binding-array", 0x3000B: "texture-format-16bit-norm",
	0x3000C: "texture-compression-astc-hdr", featMappablePrimary: "mappable-primary-buffers",
	0x3000F: "buffer-binding-array", 0x30010: "uniform-buffer-and-storage-texture-array-non-uniform-indexing",
	0x30017: "spirv-shader-passthrough", 0x30019: "vertex-attribute-64bit",
	0x3001A: "texture-format-nv12", 0x3001B: "ray-tracing-acceleration-structure", 0x3001C: "ray-query",
	0x3001D: "shader-f64", 0x3001E: "shader-i16", 0x3001F: "shader-primitive-index",
	0x30020: "shader-early-depth-test", 0x30021: "subgroup", 0x30022: "subgroup-vertex",
	0x30023: "subgroup-barrier", 0x30024: "timestamp-query-inside-encoders",
	0x30025: "timestamp-query-inside-passes", 0x30026: "shader-int64",
}

const (
	featHostMappedPointer = 0x50010
	featBufferMapExtended = 0x50014
	featMappablePrimary   = 0x3000E
)

// Feature is one value the adapter reported, with its name where known.
type Feature struct {
	Value uint32
	Name  string
}

func (f Feature) String() string {
	if f.Name == "" {
		return fmt.Sprintf("0x%X", f.Value)
	}
	return fmt.Sprintf("%s (0x%X)", f.Name, f.Value)
}

// probeRanges are the values asked about: every one webgpu.h revisions
// have used so far, with room above.
var probeRanges = [][2]uint32{{0x1, 0x40}, {0x30000, 0x30060}, {0x50000, 0x50080}}

// Features lists the adapter's features (see above), as probed when the
// backend was opened.
func (b *Backend) Features() []Feature { return b.features }

// probeFeatures asks the adapter about every value of probeRanges.
// Device thread only.
func (d *device) probeFeatures() []Feature {
	names := dawnFeatures
	if d.native {
		names = nativeFeatures
	}
	var out []Feature
	for _, r := range probeRanges {
		for v := r[0]; v < r[1]; v++ {
			if C.s4d_has_feature(d.p, d.adapter, C.uint32_t(v)) == 0 {
				continue
			}
			n, ok := standardFeatures[v]
			if !ok {
				n = names[v]
			}
			out = append(out, Feature{v, n})
		}
	}
	return out
}

// zeroCopySummary says, for the description, whether the implementation
// offers a way for the GPU to read pages where they lie.
func zeroCopySummary(native bool, fs []Feature) string {
	has := map[uint32]bool{}
	for _, f := range fs {
		has[f.Value] = true
	}
	yn := func(v uint32) string {
		if has[v] {
			return "yes"
		}
		return "no"
	}
	if native {
		return "mappable-primary-buffers " + yn(featMappablePrimary) + ", no host-pointer import"
	}
	return "host-mapped-pointer " + yn(featHostMappedPointer) + ", buffer-map-extended-usages " + yn(featBufferMapExtended)
}

// featureList joins the features for logs.
func featureList(fs []Feature) string {
	s := make([]string, len(fs))
	for i, f := range fs {
		s[i] = f.String()
	}
	return strings.Join(s, ", ")
}
