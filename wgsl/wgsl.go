// Package wgsl holds the WGSL compute kernels of the WebGPU backend. The
// sources carry a few constants that the backend fills in for the page size
// and the adapter's limits before compiling them (see Source).
package wgsl

import (
	_ "embed"
	"strconv"
	"strings"
)

// Compress classifies each page (zero / same-filled, fused with its load
// into workgroup memory) and LZ4-compresses the rest, one page per
// workgroup, into a fixed slot per page; per page it writes class, size
// and fill word.
//
//go:embed compress.wgsl
var Compress string

// Compact packs the compressed slots: "scan" turns per-page sizes into
// 4-byte aligned offsets and a total, "gather" copies each LZ4 page to its
// offset, so only meaningful bytes are read back.
//
//go:embed compact.wgsl
var Compact string

// Decompress expands LZ4 blocks into pages, one page per workgroup,
// flagging blocks that do not decode to exactly one page.
//
//go:embed decompress.wgsl
var Decompress string

// Params are the compile-time constants of the kernels.
type Params struct {
	PageWords int // page size / 4
	HashBits  int // log2 of the hash table entries (workgroup memory)
	Workgroup int // invocations per workgroup
}

// Source returns src with its constants set.
func Source(src string, p Params) string {
	r := strings.NewReplacer(
		"PAGE_WORDS_V", strconv.Itoa(p.PageWords)+"u",
		"HASH_BITS_V", strconv.Itoa(p.HashBits)+"u",
		"WG_V", strconv.Itoa(p.Workgroup)+"u",
	)
	return r.Replace(src)
}

// WorkgroupBytes is the workgroup memory the compress kernel needs.
func WorkgroupBytes(p Params) int {
	ps := p.PageWords * 4
	return ps + // the page
		4<<p.HashBits + // hash table of positions
		ps*2 + // one u16 match offset per position
		ps/8 + // match bitmap
		16 // flags
}
