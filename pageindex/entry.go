// Package pageindex maps a pool's page keys to packed 8-byte entries: the
// entry's bit layout, a Robin Hood hash table of them, and the table split
// into shards with locks of their own. Ages are kept in the entries and
// changed under read locks, through atomics.
package pageindex

import (
	"github.com/s4d-project/s4d/pagefmt"
	"github.com/s4d-project/s4d/slab"
)

// Entry packs what the store keeps per page into 8 bytes:
//
//	bits  0-31  arena handle (slab index << slotBits | slot)
//	bits 32-48  stored size in bytes (up to 65536)
//	bits 49-51  class (1..5; never 0, so a live entry is never 0)
//	bits 52-55  backend that compressed the page
//	bits 56-61  idle age in epochs, saturating
//	bit  62     recompression was tried on these bytes (TriedBit)
//	bit  63     reserved for the cold tier: the page lives on the backing
//	            file, and the handle names its place there
//
// A same-filled page keeps its 8-byte word in the arena; a zero page
// keeps nothing. Every arena object starts with a CRC-32C of the stored
// bytes that follow it, checked on every read.
type Entry uint64

// ChecksumSize is the size of the checksum before an object's stored bytes.
const ChecksumSize = 4

// MakeEntry packs a fresh entry, of age 0.
func MakeEntry(h slab.Handle, size int, c pagefmt.Class, backend uint8) Entry {
	return Entry(uint64(h) | uint64(size)<<32 | uint64(c&7)<<49 | uint64(backend&15)<<52)
}

func (e Entry) Handle() slab.Handle            { return slab.Handle(uint32(e)) }
func (e Entry) Size() int                      { return int(e>>32) & (1<<17 - 1) }
func (e Entry) Class() pagefmt.Class           { return pagefmt.Class(e>>49) & 7 }
func (e Entry) Backend() uint8                 { return uint8(e>>52) & 15 }
func (e Entry) WithHandle(h slab.Handle) Entry { return e&^0xFFFFFFFF | Entry(h) }
func (e Entry) WithBackend(b uint8) Entry      { return e&^(15<<52) | Entry(b&15)<<52 }

// ObjSize is the arena object's size: checksum and stored bytes.
func (e Entry) ObjSize() int { return ChecksumSize + e.Size() }

// HasObject says whether the page holds arena memory (not a zero page,
// not on the backing file).
func (e Entry) HasObject() bool { return e.Class() != pagefmt.ClassZero && e>>63 == 0 }

// Ages: the epochs since the page was last read or written, saturating at
// MaxAge (see Slot and Index.GetTouch).
const (
	ageShift = 56
	// MaxAge is the oldest age an entry tells: a page idle longer, or
	// marked idle, reads MaxAge.
	MaxAge        = 63
	AgeMask Entry = MaxAge << ageShift
)

func (e Entry) Age() int            { return int(e>>ageShift) & MaxAge }
func (e Entry) WithAge(a int) Entry { return e&^AgeMask | Entry(a)<<ageShift }

// TriedBit marks an entry whose bytes recompression has tried: kept or
// not, the job leaves them alone until the page is written again (a
// write makes a fresh entry, without the bit).
const TriedBit Entry = 1 << 62

func (e Entry) Tried() bool { return e&TriedBit != 0 }

// Bits of an entry on the backing file.
const (
	OnFileBit = Entry(1) << 63
	IdleBits  = Entry(0x7F) << 56     // age and tried
	KeepBits  = Entry(0xFFFFFF) << 32 // size, class and backend
)

func (e Entry) OnFile() bool { return e&OnFileBit != 0 }
