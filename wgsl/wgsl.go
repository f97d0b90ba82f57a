// Package wgsl holds the WGSL compute kernels of the WebGPU backend. The
// sources carry a few constants that the backend fills in for the page size
// and the adapter's limits before compiling them (see Source).
package wgsl

import (
	"cmp"
	_ "embed"
	"fmt"
	"strconv"
	"strings"
)

// Compress classifies each page (zero / same-filled, fused with its load
// into workgroup memory) and LZ4-compresses the rest with the algorithm of
// backends/pagelz4 (the same bytes), one page per workgroup; each block is
// appended to one packed output buffer, and per page it writes class, size
// and fill word or packed offset.
//
// It is compress.wgsl with its helpers (compress_fns.wgsl, crc.wgsl)
// appended.
var Compress = compressMain + "\n" + compressFns + "\n" + crcFns

//go:embed compress.wgsl
var compressMain string

//go:embed compress_fns.wgsl
var compressFns string

//go:embed crc.wgsl
var crcFns string

// scanSG is the subgroup prefix sum spliced into Compress when the
// adapter has subgroups.
//
//go:embed scan_sg.wgsl
var scanSG string

// Decompress expands LZ4 blocks into pages, one page per workgroup,
// flagging blocks that do not decode to exactly one page.
//
//go:embed decompress.wgsl
var Decompress string

// Gather copies a GET's pages from up to six source buffers into the
// destination on the GPU, checking each page's CRC-32C first (the Vulkan
// runtime's, for pages that need no decoding there).
var Gather = gatherMain + "\n" + crcFns

//go:embed gather.wgsl
var gatherMain string

// Params are the compile-time constants of the kernels.
type Params struct {
	PageWords int  // page size / 4 (the compress kernel is for 4 KiB pages)
	Subgroups bool // use subgroup operations (needs the subgroups feature)
	Stop      int  // benchmarks only: compress stops after this phase (0: none)
	Tune      int  // benchmarks only: chain depth other than Depth's, parts left out
	// Depth is how many chain candidates a position tries (0: pagelz4's
	// 6, whose bytes the kernel then matches exactly).
	Depth int
}

// PagelzDepth is backends/pagelz4's chain depth: with it the kernel stores
// pagelz4's bytes.
const PagelzDepth = 6

// Source returns src with its constants set.
func Source(src string, p Params) string {
	sg := []string{"SG_ENABLE_V", "", "SG_SCAN_V", "", "SG_PARAMS_V", "", "SG_CHECK_V", "", "SG_CALL_V", "scanWG"}
	if p.Subgroups {
		sg = []string{
			"SG_ENABLE_V", "enable subgroups;",
			"SG_SCAN_V", scanSG,
			"SG_PARAMS_V", ", @builtin(subgroup_invocation_id) sid: u32, @builtin(subgroup_size) ssz: u32",
			// Subgroups must be whole, aligned runs of invocation indices.
			"SG_CHECK_V", "sgId = sid;\n    sgSz = ssz;\n    let lane0 = subgroupBroadcast(t, 0u);\n" +
				"    if (ssz < 4u || WG % ssz != 0u || lane0 % ssz != 0u || t != lane0 + sid) { atomicOr(&flag, 2u); }",
			"SG_CALL_V", "scanSG",
		}
	}
	r := strings.NewReplacer(append(sg,
		"PAGE_WORDS_V", strconv.Itoa(p.PageWords)+"u",
		"STOP_V", strconv.Itoa(p.Stop)+"u",
		"TUNE_V", strconv.Itoa(p.Tune)+"u",
		"DEPTH_V", strconv.Itoa(cmp.Or(p.Depth, PagelzDepth))+"u",
		"CRC_SHIFT_V", crcShiftSource,
	)...)
	return r.Replace(src)
}

// WorkgroupBytes is the workgroup memory the compress kernel needs.
func WorkgroupBytes(p Params) int {
	const wg = 128
	return 2*2048*4 + // links and heads, reused by later phases
		2*256*4 + // round tables
		2*wg*4 + wg*4 + // round hashes and lists
		12 + wg // flags, the CRC, subgroup sums
}

// crcShiftSource is the kernel's crcShift(v, n): the CRC register v moved
// past n zero bytes (n < 8192), times x^(8n) mod P, one gfmul per bit of
// n by the constants x^(8*2^j) mod P worked out here.
var crcShiftSource = func() string {
	var b strings.Builder
	b.WriteString("fn crcShift(v0: u32, n: u32) -> u32 {\n    var v = v0;\n")
	k := uint32(1) << 30 // x^1, x^0 being bit 31
	for range 3 {
		k = gfmul(k, k)
	}
	for j := range 13 { // k = x^(8*2^j)
		fmt.Fprintf(&b, "    if ((n & %du) != 0u) { v = gfmul(0x%08xu, v); }\n", 1<<j, k)
		k = gfmul(k, k)
	}
	b.WriteString("    return v;\n}\n")
	return b.String()
}()

// gfmul is a*b mod the CRC-32C polynomial, as the kernel's gfmul.
func gfmul(a, b uint32) uint32 {
	var p uint32
	for m := uint32(1) << 31; m != 0; m >>= 1 {
		if a&m != 0 {
			p ^= b
		}
		b = b>>1 ^ 0x82f63b78&-(b&1)
	}
	return p
}
