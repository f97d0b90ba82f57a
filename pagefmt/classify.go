package pagefmt

import "encoding/binary"

// Classify says whether page is all zero or same-filled (every 8-byte word
// equal, zram's rule) and returns the repeated word. It returns 0 for pages
// that need compressing.
func Classify(page []byte) (Class, uint64) {
	if len(page) < 8 {
		return 0, 0
	}
	first := binary.LittleEndian.Uint64(page)
	// The last word first: a cheap reject for most compressible pages.
	if binary.LittleEndian.Uint64(page[len(page)-8:]) != first {
		return 0, 0
	}
	i := 0
	for ; i+32 <= len(page); i += 32 {
		if binary.LittleEndian.Uint64(page[i:]) != first ||
			binary.LittleEndian.Uint64(page[i+8:]) != first ||
			binary.LittleEndian.Uint64(page[i+16:]) != first ||
			binary.LittleEndian.Uint64(page[i+24:]) != first {
			return 0, 0
		}
	}
	for ; i+8 <= len(page); i += 8 {
		if binary.LittleEndian.Uint64(page[i:]) != first {
			return 0, 0
		}
	}
	if first == 0 {
		return ClassZero, 0
	}
	return ClassSame, first
}

// FillPage writes the page a zero or same-filled class stands for.
func FillPage(dst []byte, fill uint64) {
	if fill == 0 {
		clear(dst)
		return
	}
	binary.LittleEndian.PutUint64(dst, fill)
	for n := 8; n < len(dst); n *= 2 {
		copy(dst[n:], dst[:n])
	}
}

// DecodePlain writes the page a zero, same-filled or raw stored page stands
// for into dst (one page long). It returns false for other classes, and for
// a raw page of the wrong size.
func DecodePlain(s Stored, dst []byte) bool {
	switch s.Class {
	case ClassZero:
		clear(dst)
		return true
	case ClassSame:
		FillPage(dst, s.Fill)
		return true
	case ClassRaw:
		return len(s.Data) == len(dst) && copy(dst, s.Data) == len(dst)
	}
	return false
}
