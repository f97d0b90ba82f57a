// Package corpus makes synthetic memory pages of the kinds a memory
// compressor meets: zero, same-filled, text, pointer-heavy heap, random,
// and pages whose compressed size lands near the raw threshold.
package corpus

import (
	"encoding/binary"
	"math/rand/v2"
)

// Kind names a page generator.
type Kind string

const (
	Zero      Kind = "zero"
	Same      Kind = "same"
	Text      Kind = "text"
	Pointers  Kind = "pointers"
	Random    Kind = "random"
	Threshold Kind = "threshold" // random prefix + zeros: compresses to about the prefix
	Mixed     Kind = "mixed"     // a blend resembling a live process's heap
)

// Kinds lists every generator.
var Kinds = []Kind{Zero, Same, Text, Pointers, Random, Threshold, Mixed}

// Pages returns n pages of the given kind, deterministic in seed.
func Pages(kind Kind, n, pageSize int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, uint64(len(kind))))
	out := make([]byte, n*pageSize)
	for i := range n {
		Fill(kind, out[i*pageSize:(i+1)*pageSize], r)
	}
	return out
}

// Fill writes one page of the given kind.
func Fill(kind Kind, p []byte, r *rand.Rand) {
	switch kind {
	case Zero:
		clear(p)
	case Same:
		v := r.Uint64() | 1
		switch r.IntN(3) {
		case 0:
			v = 0x0101010101010101 * uint64(r.IntN(255)+1) // memset
		case 1:
			v = ^uint64(0)
		}
		for i := 0; i < len(p); i += 8 {
			binary.LittleEndian.PutUint64(p[i:], v)
		}
	case Text:
		text(p, r)
	case Pointers:
		pointers(p, r)
	case Random:
		for i := 0; i < len(p); i += 8 {
			binary.LittleEndian.PutUint64(p[i:], r.Uint64())
		}
	case Threshold:
		clear(p)
		// Around 3/4 of the page, where the raw decision flips.
		k := len(p)*5/8 + r.IntN(len(p)/4)
		for i := 0; i < k; i++ {
			p[i] = byte(r.Uint32())
		}
	case Mixed:
		kinds := []Kind{Zero, Zero, Zero, Same, Text, Pointers, Pointers, Random}
		Fill(kinds[r.IntN(len(kinds))], p, r)
	}
}

var words = []string{"the", "page", "memory", "compress", "daemon", "kernel", "socket",
	"value", "error", "return", "struct", "func", "static", "const", "while", "buffer",
	"index", "string", "config", "request", "=", "{", "}", "(", ")", ";", "\n", "\t"}

func text(p []byte, r *rand.Rand) {
	i := 0
	for i < len(p) {
		w := words[r.IntN(len(words))]
		if r.IntN(40) == 0 {
			w = string(rune('A' + r.IntN(26)))
		}
		i += copy(p[i:], w)
		if i < len(p) {
			p[i] = ' '
			i++
		}
	}
}

// pointers imitates a heap page: 8-byte pointers into a few regions, small
// integers, lengths and the odd zero run.
func pointers(p []byte, r *rand.Rand) {
	bases := [...]uint64{0x7f3a_1c00_0000, 0x55d4_8e60_0000, 0xc000_0000_00}
	for i := 0; i < len(p); i += 8 {
		var v uint64
		switch r.IntN(6) {
		case 0, 1, 2:
			v = bases[r.IntN(len(bases))] + uint64(r.IntN(1<<16))&^7
		case 3:
			v = uint64(r.IntN(256))
		case 4:
			v = 0
		default:
			v = uint64(r.Uint32())
		}
		binary.LittleEndian.PutUint64(p[i:], v)
	}
}
