// Package ptx holds s4d's CUDA kernels as PTX, generated from s4d.cu by
// `make ptx` (nvcc) and committed, so the binary needs no CUDA toolkit: the
// driver compiles the PTX for whatever GPU it finds.
package ptx

import _ "embed"

// Kernels is the PTX text of s4d.cu.
//
//go:embed s4d.ptx
var Kernels []byte
