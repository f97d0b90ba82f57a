// Package pagefmt holds what engines, the store and the router share about
// pages: the classes and stored formats (the interop contract: any engine,
// and the reference C libraries, decode what any engine stored), the
// batches handed to engines and what comes back, and the pages' checksums.
// It imports nothing of ours.
package pagefmt

import (
	"encoding/binary"
	"fmt"
)

// Class is how a page is stored. The formats are a contract: any backend
// must be able to decode what any other backend stored.
type Class uint8

const (
	ClassZero Class = 1 // all bytes zero; nothing stored
	ClassSame Class = 2 // every 8-byte word equal; the word is stored
	ClassLZ4  Class = 3 // a raw standard LZ4 block
	ClassZstd Class = 4 // a standard zstd frame
	ClassRaw  Class = 5 // compressed size over the threshold; stored as is
)

func (c Class) String() string {
	switch c {
	case ClassZero:
		return "zero"
	case ClassSame:
		return "same"
	case ClassLZ4:
		return "lz4"
	case ClassZstd:
		return "zstd"
	case ClassRaw:
		return "raw"
	}
	return fmt.Sprintf("class(%d)", uint8(c))
}

// Codec is the compressor asked for; pages that do not compress well
// enough are stored raw whatever the codec.
type Codec uint8

const (
	CodecLZ4  Codec = 1
	CodecZstd Codec = 2
)

func (c Codec) String() string {
	switch c {
	case CodecLZ4:
		return "lz4"
	case CodecZstd:
		return "zstd"
	}
	return fmt.Sprintf("codec(%d)", uint8(c))
}

// ParseCodec maps a codec name to its value.
func ParseCodec(s string) (Codec, error) {
	switch s {
	case "lz4":
		return CodecLZ4, nil
	case "zstd":
		return CodecZstd, nil
	}
	return 0, fmt.Errorf("unknown codec %q (want lz4 or zstd)", s)
}

// Class returns the class a compressed page of this codec is stored as.
func (c Codec) Class() Class {
	if c == CodecZstd {
		return ClassZstd
	}
	return ClassLZ4
}

// Batch is a run of whole pages to compress.
type Batch struct {
	PageSize  int
	Pages     []byte // len = n * PageSize
	Codec     Codec  // to the router, 0 asks for the daemon's codec
	Threshold int    // a compressed page larger than this is stored raw
	// Sums asks for Compressed.Sum: the store needs the checksums, and a
	// backend that computes them while the bytes are in cache saves it a
	// pass. One that cannot leaves Sum empty; one may fill it unasked
	// when they cost it nothing.
	Sums bool
	// Strong asks for a higher compression level than the foreground's,
	// at several times the cost (background recompression). A backend
	// with only one level ignores it.
	Strong bool
	// Placed says the parts delivered by CompressParts may come with Place
	// set instead of Data (see Placer): the caller writes them with it.
	Placed bool
}

// Part returns the batch of pages [lo, lo+n) of b, for a delivered part.
func (b *Batch) Part(lo, n int) Batch {
	p := *b
	p.Pages = b.Pages[lo*b.PageSize : (lo+n)*b.PageSize]
	return p
}

// Len is the number of pages in the batch.
func (b *Batch) Len() int { return len(b.Pages) / b.PageSize }

// Page returns page i of the batch.
func (b *Batch) Page(i int) []byte { return b.Pages[i*b.PageSize : (i+1)*b.PageSize] }

// Compressed is the result of compressing a batch: per page its class and,
// for lz4/zstd pages, where its bytes sit in Data. Raw pages are not copied
// into Data: the caller still holds them. Slices are reused across calls.
type Compressed struct {
	Class []Class
	Fill  []uint64 // the repeated word of same-filled pages
	Off   []uint32 // offset in Data (lz4/zstd)
	Size  []uint32 // stored size: 0 zero, 8 same, n lz4/zstd, PageSize raw
	Data  []byte
	// Sum is the CRC-32C (Castagnoli) of each page's stored bytes (see
	// Bytes; 0 for zero pages), for backends that compute it on the way;
	// empty otherwise, and the store computes it.
	Sum []uint32
	// Place, in a part delivered for a Batch with Placed set, writes the
	// part's objects where the caller wants them; Data is then empty.
	Place Placer
}

// Reset sizes the per-page slices for n pages, keeping their capacity.
func (c *Compressed) Reset(n int) {
	c.Class = Resize(c.Class, n)
	c.Fill = Resize(c.Fill, n)
	c.Off = Resize(c.Off, n)
	c.Size = Resize(c.Size, n)
	c.Data = c.Data[:0]
	c.Sum = c.Sum[:0]
	c.Place = nil
}

// Bytes returns the stored bytes of page i (nil for zero, the 8-byte word
// for same, the page itself for raw).
func (c *Compressed) Bytes(i int, b *Batch) []byte {
	switch c.Class[i] {
	case ClassZero:
		return nil
	case ClassSame:
		var w [8]byte
		binary.LittleEndian.PutUint64(w[:], c.Fill[i])
		return w[:]
	case ClassRaw:
		return b.Page(i)
	}
	return c.Data[c.Off[i] : c.Off[i]+c.Size[i]]
}

// Resize returns s with length n, reusing its array when it has room: the
// per-page slices of a batch are kept from one batch to the next. What it
// holds is not cleared.
func Resize[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}

// Stored is one page as kept by the store, to be decompressed.
type Stored struct {
	Class Class
	Fill  uint64
	Data  []byte
	// Check says Data (the stored bytes: the word of a same-filled page)
	// is not checked yet against Sum, its CRC-32C: the store left that to
	// whoever decodes it, who reads the bytes anyway (see SumChecker).
	Check bool
	Sum   uint32
}

// Decompression is a batch of stored pages to expand into Dst.
type Decompression struct {
	PageSize int
	Src      []Stored
	Dst      []byte // len = len(Src) * PageSize
	Failed   []bool // set by the backend: page i did not decode
	// Corrupt marks the pages that failed their Check (Failed too). It is
	// the caller's, len(Src) long and clear when any page asks a check; a
	// backend only ever sets entries of it.
	Corrupt []bool
}

// Codecs lists the codecs d's pages were stored with, LZ4 first.
func (d *Decompression) Codecs() []Codec {
	var lz, zs bool
	for i := range d.Src {
		switch d.Src[i].Class {
		case ClassLZ4:
			lz = true
		case ClassZstd:
			zs = true
		}
	}
	var out []Codec
	if lz {
		out = append(out, CodecLZ4)
	}
	if zs {
		out = append(out, CodecZstd)
	}
	return out
}
