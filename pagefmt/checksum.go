package pagefmt

import "hash/crc32"

// Castagnoli is the CRC-32C table every stored page is checksummed with.
var Castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Checksum returns the CRC-32C of page i's stored bytes (see Bytes; 0 for
// a zero page): what Sum holds.
func (c *Compressed) Checksum(i int, b *Batch) uint32 {
	switch c.Class[i] {
	case ClassZero:
		return 0
	case ClassSame:
		return wordChecksum(c.Fill[i])
	case ClassRaw:
		return crc32.Checksum(b.Page(i), Castagnoli)
	}
	return crc32.Checksum(c.Data[c.Off[i]:c.Off[i]+c.Size[i]], Castagnoli)
}

// wordChecksum is the CRC-32C of a same-filled page's stored word, worked
// out by hand: handing crc32 an 8-byte array would move it to the heap.
func wordChecksum(w uint64) uint32 {
	crc := ^uint32(0)
	for range 8 {
		crc = Castagnoli[byte(crc)^byte(w)] ^ crc>>8
		w >>= 8
	}
	return ^crc
}

// SumOK reports whether s's bytes match its Sum (true when it asks no check).
func (s *Stored) SumOK() bool {
	return !s.Check || crc32.Checksum(s.Data, Castagnoli) == s.Sum
}

// CorruptFlags gives d a Corrupt of len(Src), cleared, unless the caller
// sized it (then it is the caller's, and kept): for a backend that checks
// sums.
func (d *Decompression) CorruptFlags() {
	if n := len(d.Src); len(d.Corrupt) < n {
		d.Corrupt = Resize(d.Corrupt, n)
		clear(d.Corrupt)
	}
}

// NeedsCheck reports whether any page of d asks for a check.
func (d *Decompression) NeedsCheck() bool {
	for i := range d.Src {
		if d.Src[i].Check {
			return true
		}
	}
	return false
}

// CheckSums checks pages [lo, hi) of d that ask for it, marking those that
// fail in Corrupt, and takes their Check off: done.
func (d *Decompression) CheckSums(lo, hi int) {
	for i := lo; i < hi; i++ {
		if s := &d.Src[i]; s.Check {
			d.Corrupt[i] = !s.SumOK()
			s.Check = false
		}
	}
}
