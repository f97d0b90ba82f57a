package pagefmt

import (
	"encoding/binary"
	"hash/crc32"
	"testing"
)

func TestChecksumOfEveryClass(t *testing.T) {
	const ps = 64
	b := &Batch{PageSize: ps, Pages: make([]byte, 4*ps)}
	for i := range ps {
		b.Pages[3*ps+i] = byte(i * 7)
	}
	c := &Compressed{
		Class: []Class{ClassZero, ClassSame, ClassLZ4, ClassRaw},
		Fill:  []uint64{0, 0x0102030405060708, 0, 0},
		Off:   []uint32{0, 0, 2, 0},
		Size:  []uint32{0, 8, 5, ps},
		Data:  []byte{9, 9, 1, 2, 3, 4, 5},
	}
	for i := range c.Class {
		want := uint32(0)
		if i > 0 {
			want = crc32.Checksum(c.Bytes(i, b), Castagnoli)
		}
		if got := c.Checksum(i, b); got != want {
			t.Errorf("page %d (%v): %#x, want %#x", i, c.Class[i], got, want)
		}
	}
	for _, w := range []uint64{0, 1, 0xDEADBEEF, 1<<64 - 1} {
		var x [8]byte
		binary.LittleEndian.PutUint64(x[:], w)
		if got, want := wordChecksum(w), crc32.Checksum(x[:], Castagnoli); got != want {
			t.Errorf("word %#x: %#x, want %#x", w, got, want)
		}
	}
}
