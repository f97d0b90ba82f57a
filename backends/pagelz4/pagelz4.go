// Package pagelz4 compresses one memory page into a raw LZ4 block with a
// search over the whole page: every earlier position with the same 4-byte
// hash is a candidate (up to ChainDepth of them, nearest first), the
// longest match wins, and a match is put off by one byte when the next
// position holds a longer one. It is the exact reference for the GPU
// engines' LZ4 kernels (ptx/s4d.cu, s4d_lz4, and wgsl/compress.wgsl), which
// must produce the same bytes, and it is written so that every step maps
// onto them: the
// hash chains, the per-position best match and the parse are separate
// passes, the first two parallel over positions.
package pagelz4

const (
	// HashBits sizes the table of chain heads (2^11 entries: as good a
	// ratio as 2^12 on our corpora, in half the GPU's shared memory).
	HashBits = 11
	// ChainDepth is how many earlier positions with the same hash are
	// tried per position (6: within 0.3% of 8's ratio on a Python heap,
	// a quarter less work; 4 loses 5%).
	ChainDepth = 6
	// SelectCap caps the match lengths compared when choosing among
	// candidates and deciding whether to defer a match by a byte; the
	// chosen match is then extended in full.
	SelectCap = 19
	// MaxPage is the largest page the kernel holds (offsets fit 12 bits).
	MaxPage = 4096

	minMatch   = 4
	lastLits   = 5  // an LZ4 block ends with at least 5 literals
	matchLimit = 12 // and its last match starts at least 12 bytes before the end
	none       = 0xFFFF
)

func load32(b []byte, p int) uint32 {
	return uint32(b[p]) | uint32(b[p+1])<<8 | uint32(b[p+2])<<16 | uint32(b[p+3])<<24
}

func hash(k uint32) uint32 { return (k * 2654435761) >> (32 - HashBits) }

// Scratch is the working memory of one compression; reuse it.
type Scratch struct {
	head [1 << HashBits]uint16
	prev [MaxPage]uint16
	best [MaxPage]uint8  // capped length of the best match at each position
	off  [MaxPage]uint16 // its offset
}

// Compress writes src (at most MaxPage bytes) as an LZ4 block into dst and
// returns its length, or 0 when the block would not fit in dst.
func Compress(src, dst []byte, s *Scratch) int {
	n := len(src)
	if n > MaxPage {
		panic("pagelz4: page larger than MaxPage")
	}
	last := n - matchLimit // the last position a match may start at
	// Chains: prev[p] is the nearest earlier position with p's hash.
	for i := range s.head {
		s.head[i] = none
	}
	for p := 0; p+minMatch <= n; p++ {
		h := hash(load32(src, p))
		s.prev[p] = s.head[h]
		s.head[h] = uint16(p)
	}
	// Best match at every position where one may start.
	for p := 0; p <= last; p++ {
		s.best[p], s.off[p] = 0, 0
		k := load32(src, p)
		limit := min(n-lastLits-p, SelectCap)
		q := s.prev[p]
		// A candidate that reaches the cap cannot be beaten: stop there.
		for d := 0; d < ChainDepth && q != none && int(s.best[p]) < limit; d++ {
			if load32(src, int(q)) == k {
				l := minMatch
				for l < limit && src[int(q)+l] == src[p+l] {
					l++
				}
				if uint8(l) > s.best[p] {
					s.best[p], s.off[p] = uint8(l), uint16(p-int(q))
				}
			}
			q = s.prev[q]
		}
	}
	// Parse: a match starts at the first position from the cursor whose
	// best match is not beaten by the next position's.
	di, anchor := 0, 0
	for p := 0; p <= last; {
		b := s.best[p]
		if b < minMatch || (p+1 <= last && s.best[p+1] > b) {
			p++
			continue
		}
		off := int(s.off[p])
		l := int(b)
		if l == SelectCap {
			for p+l < n-lastLits && src[p+l] == src[p+l-off] {
				l++
			}
		}
		if di = emit(dst, di, src[anchor:p], off, l); di < 0 {
			return 0
		}
		p += l
		anchor = p
	}
	if di = emit(dst, di, src[anchor:], 0, 0); di < 0 {
		return 0
	}
	return di
}

// emit appends one sequence (literals, then a match unless mlen is 0) and
// returns the new length of dst, or -1 if it does not fit.
func emit(dst []byte, di int, lits []byte, off, mlen int) int {
	ll := len(lits)
	need := 1 + ll + (ll+255-15)/255
	if mlen > 0 {
		need += 2 + (mlen-minMatch+255-15)/255
	}
	if di+need > len(dst) {
		return -1
	}
	tok := di
	di++
	t := byte(min(ll, 15)) << 4
	if ll >= 15 {
		di = lenBytes(dst, di, ll-15)
	}
	di += copy(dst[di:], lits)
	if mlen > 0 {
		dst[di], dst[di+1] = byte(off), byte(off>>8)
		di += 2
		m := mlen - minMatch
		t |= byte(min(m, 15))
		if m >= 15 {
			di = lenBytes(dst, di, m-15)
		}
	}
	dst[tok] = t
	return di
}

func lenBytes(dst []byte, di, v int) int {
	for ; v >= 255; v -= 255 {
		dst[di] = 255
		di++
	}
	dst[di] = byte(v)
	return di + 1
}
