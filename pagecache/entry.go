package pagecache

import "github.com/s4d-project/s4d/backends"

// entry packs what the store keeps per page into 8 bytes:
//
//	bits  0-31  arena handle (slab index << slotBits | slot)
//	bits 32-48  stored size in bytes (up to 65536)
//	bits 49-51  class (1..5; never 0, so a live entry is never 0)
//	bits 52-55  backend that compressed the page
//	bits 56-61  idle age in epochs, saturating (idle.go)
//	bit  62     recompression was tried on these bytes (recompress.go)
//	bit  63     reserved for the cold tier: the page lives on the backing
//	            file, and the handle names its place there
//
// A same-filled page keeps its 8-byte word in the arena; a zero page
// keeps nothing. Every arena object starts with a CRC-32C of the stored
// bytes that follow it, checked on every read.
type entry uint64

func makeEntry(h handle, size int, c backends.Class, backend uint8) entry {
	return entry(uint64(h) | uint64(size)<<32 | uint64(c&7)<<49 | uint64(backend&15)<<52)
}

func (e entry) handle() handle            { return handle(uint32(e)) }
func (e entry) size() int                 { return int(e>>32) & (1<<17 - 1) }
func (e entry) class() backends.Class     { return backends.Class(e>>49) & 7 }
func (e entry) backend() uint8            { return uint8(e>>52) & 15 }
func (e entry) withHandle(h handle) entry { return e&^0xFFFFFFFF | entry(h) }

// objSize is the arena object's size: checksum and stored bytes.
func (e entry) objSize() int { return checksumSize + e.size() }

// hasObject says whether the page holds arena memory (not a zero page,
// not on the backing file).
func (e entry) hasObject() bool { return e.class() != backends.ClassZero && e>>63 == 0 }
