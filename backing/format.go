package backing

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
)

// The file's layout: blocks of BlockSize bytes. Blocks 0 and 1 hold two
// copies of the header, written in turn, so a write torn by a crash
// leaves the other; the rest hold packed page objects and the checkpoint
// index, placed by the allocator.
const (
	BlockSize    = 4096
	headerBlocks = 2
	// FormatVersion changes whenever the layout does: a file of another
	// version is refused, never reinterpreted.
	FormatVersion = 1
	magic         = "S4DBACK\x00"
	indexMagic    = "S4DINDEX"
	headerLen     = 8 + 4 + 4 + 8 + 4 + 8 + 8 + 8 + 4 + 4
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// header describes the file; it is rewritten at each checkpoint.
type header struct {
	Version   uint32
	PageSize  uint32
	Blocks    uint64 // blocks in the file, headers included
	UnitShift uint32 // handles count units of 1<<UnitShift bytes
	Seq       uint64 // checkpoint number; the newest valid copy wins
	IndexOff  uint64 // byte offset of the checkpoint index; 0 = none
	IndexLen  uint64
	IndexSum  uint32 // CRC-32C of the index bytes
}

func (h *header) encode() []byte {
	b := make([]byte, 0, BlockSize)
	b = append(b, magic...)
	b = binary.LittleEndian.AppendUint32(b, h.Version)
	b = binary.LittleEndian.AppendUint32(b, h.PageSize)
	b = binary.LittleEndian.AppendUint64(b, h.Blocks)
	b = binary.LittleEndian.AppendUint32(b, h.UnitShift)
	b = binary.LittleEndian.AppendUint64(b, h.Seq)
	b = binary.LittleEndian.AppendUint64(b, h.IndexOff)
	b = binary.LittleEndian.AppendUint64(b, h.IndexLen)
	b = binary.LittleEndian.AppendUint32(b, h.IndexSum)
	b = binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
	return b[:BlockSize]
}

// Reasons a header is refused; decodeHeader wraps them with detail.
var (
	errNotOurs  = errors.New("not an s4d backing file")
	errDamaged  = errors.New("damaged s4d backing file")
	errVersion  = errors.New("s4d backing file of another format version")
	errBlank    = errors.New("blank header")
	errTooSmall = errors.New("backing file too small")
)

// decodeHeader reads one header copy. A block of zeros is errBlank: a
// fresh file.
func decodeHeader(b []byte) (header, error) {
	var h header
	if len(b) < headerLen {
		return h, fmt.Errorf("%w: header of %d bytes", errDamaged, len(b))
	}
	if allZero(b[:min(len(b), BlockSize)]) {
		return h, errBlank
	}
	if string(b[:8]) != magic {
		return h, fmt.Errorf("%w: magic %q", errNotOurs, b[:8])
	}
	sum := binary.LittleEndian.Uint32(b[headerLen-4:])
	if crc32.Checksum(b[:headerLen-4], castagnoli) != sum {
		return h, fmt.Errorf("%w: header checksum mismatch", errDamaged)
	}
	r := b[8:]
	u32 := func() uint32 { v := binary.LittleEndian.Uint32(r); r = r[4:]; return v }
	u64 := func() uint64 { v := binary.LittleEndian.Uint64(r); r = r[8:]; return v }
	h.Version, h.PageSize, h.Blocks, h.UnitShift = u32(), u32(), u64(), u32()
	h.Seq, h.IndexOff, h.IndexLen, h.IndexSum = u64(), u64(), u64(), u32()
	if h.Version != FormatVersion {
		return h, fmt.Errorf("%w: version %d, this s4d reads version %d", errVersion, h.Version, FormatVersion)
	}
	if h.Blocks <= headerBlocks || h.UnitShift < 4 || h.UnitShift > 20 || h.PageSize < 4096 || h.PageSize > 65536 {
		return h, fmt.Errorf("%w: header values out of range", errDamaged)
	}
	if h.IndexOff != 0 && (h.IndexOff < headerBlocks*BlockSize || h.IndexOff%BlockSize != 0 ||
		h.IndexLen == 0 || h.IndexLen > h.Blocks*BlockSize || h.IndexOff+h.IndexLen > h.Blocks*BlockSize) {
		return h, fmt.Errorf("%w: index outside the file", errDamaged)
	}
	return h, nil
}

func allZero(b []byte) bool {
	for _, x := range b {
		if x != 0 {
			return false
		}
	}
	return true
}

// Index is what a checkpoint records: every pool with its owner, and per
// page its key and the store's own 8-byte word for it (class, size,
// backend and place in the file), which this package keeps opaque.
// Backends names the store's backend numbers.
type Index struct {
	Backends []string
	Pools    []Pool
}

// Pool is one pool of an Index.
type Pool struct {
	Name  string
	UID   uint32
	Codec uint8 // the pool's own codec, as the store numbers it (0: the daemon's)
	Keys  []uint64
	Words []uint64
}

// Pages counts the pages of an index.
func (x *Index) Pages() int {
	n := 0
	for _, p := range x.Pools {
		n += len(p.Keys)
	}
	return n
}

// Encode appends the index's bytes to b.
func (x *Index) Encode(b []byte) []byte {
	b = append(b, indexMagic...)
	b = binary.LittleEndian.AppendUint32(b, FormatVersion)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(x.Backends)))
	for _, n := range x.Backends {
		b = appendString(b, n)
	}
	b = binary.LittleEndian.AppendUint32(b, uint32(len(x.Pools)))
	for _, p := range x.Pools {
		b = appendString(b, p.Name)
		b = binary.LittleEndian.AppendUint32(b, p.UID)
		b = append(b, p.Codec)
		b = binary.LittleEndian.AppendUint64(b, uint64(len(p.Keys)))
		for i, k := range p.Keys {
			b = binary.LittleEndian.AppendUint64(b, k)
			b = binary.LittleEndian.AppendUint64(b, p.Words[i])
		}
	}
	return b
}

func appendString(b []byte, s string) []byte {
	b = binary.LittleEndian.AppendUint16(b, uint16(len(s)))
	return append(b, s...)
}

// DecodeIndex parses an index, refusing anything malformed; the words'
// meaning is for the caller to check.
func DecodeIndex(b []byte) (*Index, error) {
	d := decoder{b: b}
	if string(d.bytes(8)) != indexMagic {
		return nil, fmt.Errorf("%w: index magic", errDamaged)
	}
	if v := d.u32(); d.err == nil && v != FormatVersion {
		return nil, fmt.Errorf("%w: index version %d", errVersion, v)
	}
	x := &Index{}
	nb := d.u32()
	if d.err == nil && nb > 16 {
		return nil, fmt.Errorf("%w: %d backend names", errDamaged, nb)
	}
	for i := uint32(0); i < nb && d.err == nil; i++ {
		x.Backends = append(x.Backends, d.str())
	}
	np := d.u32()
	// Each pool takes at least 15 bytes: a count beyond what is left is damage.
	if d.err == nil && uint64(np)*15 > uint64(len(d.b)) {
		return nil, fmt.Errorf("%w: %d pools in %d bytes", errDamaged, np, len(d.b))
	}
	seen := map[string]bool{}
	for i := uint32(0); i < np && d.err == nil; i++ {
		p := Pool{Name: d.str(), UID: d.u32(), Codec: d.bytes(1)[0]}
		n := d.u64()
		if d.err == nil && (n > uint64(len(d.b))/16 || seen[p.Name] || p.Name == "") {
			return nil, fmt.Errorf("%w: pool %q of %d pages in %d bytes", errDamaged, p.Name, n, len(d.b))
		}
		seen[p.Name] = true
		p.Keys, p.Words = make([]uint64, n), make([]uint64, n)
		for j := range p.Keys {
			p.Keys[j], p.Words[j] = d.u64(), d.u64()
		}
		x.Pools = append(x.Pools, p)
	}
	if d.err != nil {
		return nil, d.err
	}
	if len(d.b) != 0 {
		return nil, fmt.Errorf("%w: %d bytes after the index", errDamaged, len(d.b))
	}
	return x, nil
}

type decoder struct {
	b   []byte
	err error
}

func (d *decoder) bytes(n int) []byte {
	if d.err != nil || len(d.b) < n {
		d.err = fmt.Errorf("%w: index truncated", errDamaged)
		return make([]byte, n)
	}
	v := d.b[:n]
	d.b = d.b[n:]
	return v
}

func (d *decoder) u32() uint32 { return binary.LittleEndian.Uint32(d.bytes(4)) }
func (d *decoder) u64() uint64 { return binary.LittleEndian.Uint64(d.bytes(8)) }
func (d *decoder) str() string {
	n := binary.LittleEndian.Uint16(d.bytes(2))
	return string(d.bytes(int(n)))
}
