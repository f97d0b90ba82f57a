package cpu

import (
	"encoding/binary"
	"math/bits"
	"unsafe"
)

// pageLZ4 compresses one page (at most 64 KiB) into a raw LZ4 block the way
// C's LZ4 does for small inputs, and so the kernel's zram: a 4-byte hash
// into a table of 16-bit positions that stays in L1, a greedy parse whose
// search step grows on incompressible stretches, matches extended
// backwards and forwards. pierrec/lz4 hashes 6 bytes into a 64 Ki-entry
// table; on 4 KiB pages it misses the 4- and 5-byte matches and spends its
// time on a table 8 times the page (a Python heap: ratio 2.63 against
// zram's 2.70).
type pageLZ4 struct {
	table      [1 << lz4HashLog]uint16
	op, anchor int // see sequences
}

const (
	lz4HashLog   = 13
	lz4HashMask  = 1<<lz4HashLog - 1
	lz4MinMatch  = 4
	lz4LastLits  = 5  // a block ends with at least 5 literals
	lz4MFLimit   = 12 // and its last match starts at least 12 bytes before the end
	lz4SkipShift = 6  // the search step grows by one every 64 misses
	// lz4Slack is what a block still needs after any sequence: a token
	// and the 5 last literals. A sequence is only written with this much
	// room behind it, so literals may be copied 8 bytes at a time.
	lz4Slack = 1 + lz4LastLits
)

func lz4Hash(v uint32) uint32 { return (v * 2654435761) >> (32 - lz4HashLog) }

// The compressor reads and writes the page through pointers: positions come
// from the hash table, which the compiler cannot prove in range, and its
// bounds checks (two per load) and the spills they caused made it half as
// fast as C's LZ4. compress keeps every access inside src and dst by
// construction, noted where it matters; lz4ref_test.go holds the
// bounds-checked version its output must equal. Going through byte arrays
// keeps the loads little-endian and legal at any alignment on every
// architecture (a single load where the machine allows it).
func ld8(p unsafe.Pointer, i int) byte { return *(*byte)(unsafe.Add(p, i)) }
func ld32(p unsafe.Pointer, i int) uint32 {
	return binary.LittleEndian.Uint32((*[4]byte)(unsafe.Add(p, i))[:])
}
func ld64(p unsafe.Pointer, i int) uint64 {
	return binary.LittleEndian.Uint64((*[8]byte)(unsafe.Add(p, i))[:])
}
func st8(p unsafe.Pointer, i int, v byte) { *(*byte)(unsafe.Add(p, i)) = v }
func st16(p unsafe.Pointer, i int, v uint16) {
	binary.LittleEndian.PutUint16((*[2]byte)(unsafe.Add(p, i))[:], v)
}
func cp8(d unsafe.Pointer, i int, s unsafe.Pointer, j int) {
	*(*[8]byte)(unsafe.Add(d, i)) = *(*[8]byte)(unsafe.Add(s, j))
}

// compress writes src as an LZ4 block into dst and returns its length, or
// 0 when it does not fit in dst (the page is then stored raw).
func (c *pageLZ4) compress(src, dst []byte) int {
	n := len(src)
	if n > 1<<16 {
		return 0
	}
	if n < lz4MFLimit+1 {
		return lastLiterals(dst, 0, src)
	}
	op, anchor := c.sequences(src, dst)
	if op < 0 {
		return 0
	}
	return lastLiterals(dst, op, src[anchor:])
}

// sequences writes src's sequences into dst and returns where they end and
// where the last literals begin; op < 0 when they do not fit. The output
// position and anchor wait in c while a match is searched for, and
// the match length is counted in place: the search loop then keeps everything
// it touches in registers.
func (c *pageLZ4) sequences(src, dst []byte) (op, anchor int) {
	n := len(src)
	clear(c.table[:])
	s := unsafe.Pointer(unsafe.SliceData(src))
	d := unsafe.Pointer(unsafe.SliceData(dst))
	dn := len(dst)
	mfLimit := n - lz4MFLimit + 1 // a match starts before this
	ip := 1
	for {
		// Find a match: the step grows while none comes. Positions stay
		// below mfLimit, so 4-byte loads there end 8 bytes inside src; the
		// table only holds positions already passed.
		c.op, c.anchor = op, anchor
		var match int
		{
			fwd, search := ip, 1<<lz4SkipShift
			fv := ld32(s, fwd)
			for {
				ip = fwd
				v := fv
				fwd += search >> lz4SkipShift
				search++
				if fwd > mfLimit {
					return c.op, c.anchor
				}
				h := lz4Hash(v) & lz4HashMask
				match = int(c.table[h])
				fv = ld32(s, fwd)
				c.table[h] = uint16(ip)
				if ld32(s, match) == v {
					break
				}
			}
		}
		op, anchor = c.op, c.anchor
		// Extend it backwards over the literals.
		for ip > anchor && match > 0 && ld8(s, ip-1) == ld8(s, match-1) {
			ip--
			match--
		}
		for {
			// The match's length past its first 4 bytes, up to the last
			// 5 bytes of the page, 8 bytes at a time.
			m := 0
			{
				a, b, limit := ip+lz4MinMatch, match+lz4MinMatch, mfLimit+lz4MFLimit-lz4LastLits-1
				for a+8 <= limit {
					if x := ld64(s, a) ^ ld64(s, b); x != 0 {
						a += bits.TrailingZeros64(x) / 8
						goto counted
					}
					a, b = a+8, b+8
				}
				for a < limit && ld8(s, a) == ld8(s, b) {
					a, b = a+1, b+1
				}
			counted:
				m = a - (ip + lz4MinMatch)
			}
			// The sequence: literals since anchor, then the match. It is
			// written only if it fits with lz4Slack behind it; if not, no
			// block ending this way fits. (x+240)/255 is the count of a
			// length's extra bytes, x>>7+1 a cheaper bound on it.
			lits := ip - anchor
			if op+lits+lits>>7+m>>7+5+lz4Slack > dn &&
				op+1+(lits+240)/255+lits+2+(m+240)/255+lz4Slack > dn {
				return -1, 0
			}
			st8(d, op, byte(min(lits, 15)<<4|min(m, 15)))
			op++
			if lits >= 15 {
				op = putLen(d, op, lits-15)
			}
			if lits <= 32 {
				// 8 at a time: at most 7 bytes beyond the literals, where
				// the offset and the slack go; read below ip+8 < n.
				for i := 0; i < lits; i += 8 {
					cp8(d, op+i, s, anchor+i)
				}
				op += lits
			} else {
				op += copy(unsafe.Slice((*byte)(unsafe.Add(d, op)), lits), unsafe.Slice((*byte)(unsafe.Add(s, anchor)), lits))
			}
			st16(d, op, uint16(ip-match))
			op += 2
			if m >= 15 {
				op = putLen(d, op, m-15)
			}
			ip += m + lz4MinMatch
			anchor = ip
			if ip >= mfLimit {
				return op, anchor
			}
			// Fill the table behind, and try the next position at once.
			c.table[lz4Hash(ld32(s, ip-2))] = uint16(ip - 2)
			v := ld32(s, ip)
			h := lz4Hash(v)
			match = int(c.table[h])
			c.table[h] = uint16(ip)
			if ld32(s, match) != v {
				break
			}
		}
		ip++
	}
}

// putLen writes LZ4's extra length bytes for n at op; the caller has made
// room for them.
func putLen(d unsafe.Pointer, op, n int) int {
	for ; n >= 255; n -= 255 {
		st8(d, op, 255)
		op++
	}
	st8(d, op, byte(n))
	return op + 1
}

// lastLiterals ends the block with lits, or returns 0 if it does not fit.
func lastLiterals(dst []byte, op int, lits []byte) int {
	n := len(lits)
	need := 1 + n
	if n >= 15 {
		need += (n-15)/255 + 1
	}
	if op+need > len(dst) {
		return 0
	}
	if n >= 15 {
		dst[op] = 15 << 4
		op++
		for n := n - 15; ; n -= 255 {
			if n < 255 {
				dst[op] = byte(n)
				op++
				break
			}
			dst[op] = 255
			op++
		}
	} else {
		dst[op] = byte(n << 4)
		op++
	}
	return op + copy(dst[op:], lits)
}
