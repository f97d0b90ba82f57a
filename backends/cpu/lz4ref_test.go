package cpu

// The page compressor as it was before it read and wrote through pointers:
// a plain, bounds-checked rendering of the same parse, kept as the
// reference that pageLZ4's output must equal byte for byte.

import (
	"encoding/binary"
	"math/bits"
)

type refPageLZ4 struct {
	table [1 << lz4HashLog]uint16
}

func refHash(v uint32) uint32 { return (v * 2654435761) >> (32 - lz4HashLog) }

func refLoad32(b []byte, i int) uint32 { return binary.LittleEndian.Uint32(b[i:]) }

// compress writes src as an LZ4 block into dst and returns its length, or
// 0 when it does not fit in dst (the page is then stored raw).
func (c *refPageLZ4) compress(src, dst []byte) int {
	n := len(src)
	if n > 1<<16 {
		return 0
	}
	if n < lz4MFLimit+1 {
		return refLastLiterals(dst, 0, src)
	}
	clear(c.table[:])
	t := &c.table
	matchLimit := n - lz4LastLits
	mfLimit := n - lz4MFLimit + 1 // a match starts before this
	anchor, op := 0, 0
	ip := 1
	forwardH := refHash(refLoad32(src, ip))
	for {
		// Find a match: the step grows while none comes.
		var match int
		{
			forwardIP, search := ip, 1<<lz4SkipShift
			for {
				h := forwardH
				ip = forwardIP
				forwardIP += search >> lz4SkipShift
				search++
				if forwardIP > mfLimit {
					return refLastLiterals(dst, op, src[anchor:])
				}
				match = int(t[h])
				forwardH = refHash(refLoad32(src, forwardIP))
				t[h] = uint16(ip)
				if refLoad32(src, match) == refLoad32(src, ip) {
					break
				}
			}
		}
		// Extend it backwards over the literals.
		for ip > anchor && match > 0 && src[ip-1] == src[match-1] {
			ip--
			match--
		}
		for {
			// The sequence: literals since anchor, then the match.
			lits := ip - anchor
			ml := lz4MinMatch + refMatchLen(src, ip+lz4MinMatch, match+lz4MinMatch, matchLimit)
			need := 1 + lits + lits/255 + 1 + 2 + (ml-lz4MinMatch)/255 + 1
			if op+need > len(dst) {
				return 0
			}
			tok := op
			op++
			if lits >= 15 {
				dst[tok] = 15 << 4
				op = refPutLen(dst, op, lits-15)
			} else {
				dst[tok] = byte(lits << 4)
			}
			op += copy(dst[op:], src[anchor:ip])
			binary.LittleEndian.PutUint16(dst[op:], uint16(ip-match))
			op += 2
			if m := ml - lz4MinMatch; m >= 15 {
				dst[tok] |= 15
				op = refPutLen(dst, op, m-15)
			} else {
				dst[tok] |= byte(m)
			}
			ip += ml
			anchor = ip
			if ip >= mfLimit {
				return refLastLiterals(dst, op, src[anchor:])
			}
			// Fill the table behind, and try the next position at once.
			t[refHash(refLoad32(src, ip-2))] = uint16(ip - 2)
			h := refHash(refLoad32(src, ip))
			match = int(t[h])
			t[h] = uint16(ip)
			if refLoad32(src, match) != refLoad32(src, ip) {
				break
			}
		}
		ip++
		forwardH = refHash(refLoad32(src, ip))
	}
}

// refMatchLen counts equal bytes at a and b (a > b), stopping at limit.
func refMatchLen(src []byte, a, b, limit int) int {
	start := a
	for a+8 <= limit {
		if x := binary.LittleEndian.Uint64(src[a:]) ^ binary.LittleEndian.Uint64(src[b:]); x != 0 {
			return a + bits.TrailingZeros64(x)/8 - start
		}
		a, b = a+8, b+8
	}
	for a < limit && src[a] == src[b] {
		a, b = a+1, b+1
	}
	return a - start
}

// refPutLen writes LZ4's extra length bytes for n at op.
func refPutLen(dst []byte, op, n int) int {
	for ; n >= 255; n -= 255 {
		dst[op] = 255
		op++
	}
	dst[op] = byte(n)
	return op + 1
}

// refLastLiterals ends the block with lits, or returns 0 if it does not fit.
func refLastLiterals(dst []byte, op int, lits []byte) int {
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
		op = refPutLen(dst, op+1, n-15)
	} else {
		dst[op] = byte(n << 4)
		op++
	}
	return op + copy(dst[op:], lits)
}
