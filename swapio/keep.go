package swapio

/*
#include "store.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"time"

	"golang.org/x/sys/unix"
)

// A device's pages across a planned restart: the daemon fences writes
// off (Fence: the queues go on serving reads, so that a process, the
// daemon included, can still fault its pages back in), Export hands every
// block that holds data to the daemon (which keeps it in its own store,
// and so in the backing file with persist), the queues stop, and the next
// daemon puts the pages back with Import before its queues start.

// ExportBatch is how many blocks Export hands over at once.
const ExportBatch = 1024

// Export calls fn with the blocks from lo to hi (exclusive, clamped to
// the store) holding data, in order, a batch at a time: keys, their pages (PageSize bytes each) and the blocks lost with
// a crash that were never written since (they must stay lost). Zero and
// empty blocks are left out: a block missing after Import reads as zeros.
// Writes must be fenced off (Fence) or the queues stopped. Exports of
// ranges that do not overlap may run at once.
func (st *Store) Export(lo, hi uint64, fn func(keys []uint64, pages []byte, lost []uint64) error) error {
	keys := make([]uint64, 0, ExportBatch)
	lost := make([]uint64, 0, ExportBatch)
	pages := make([]byte, ExportBatch*PageSize)
	flush := func() error {
		if len(keys) == 0 && len(lost) == 0 {
			return nil
		}
		if err := fn(keys, pages[:len(keys)*PageSize], lost); err != nil {
			return err
		}
		keys, lost = keys[:0], lost[:0]
		return nil
	}
	for b := lo; b < min(hi, st.blocks); b++ {
		switch C.s4d_store_kind(st.s, C.uint64_t(b)) {
		case C.S4D_SAME, C.S4D_LZ4, C.S4D_RAW, C.S4D_FILE:
			if err := st.read(b, pages[len(keys)*PageSize:(len(keys)+1)*PageSize]); err != nil {
				// A page that fails its hash is not handed on as if good.
				lost = append(lost, b)
				break
			}
			keys = append(keys, b)
		case C.S4D_LOST:
			lost = append(lost, b)
		default:
			continue
		}
		if len(keys) == ExportBatch || len(lost) == ExportBatch {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	return flush()
}

// importWait bounds how long Import waits for the refill to find memory.
const importWait = 30 * time.Second

// Import stores page in block, before the queues serve: a write that
// finds no slab waits for the refill instead of failing.
func (st *Store) Import(block uint64, page, scratch []byte) error {
	if len(page) != PageSize || len(scratch) < PageSize {
		return fmt.Errorf("import: page of %d bytes, scratch of %d", len(page), len(scratch))
	}
	deadline := time.Now().Add(importWait)
	for {
		err := st.write(block, page, scratch)
		if !errors.Is(err, unix.ENOMEM) {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("import of block %d: no memory for it after %v", block, importWait)
		}
		time.Sleep(time.Millisecond)
	}
}

// Lose makes one block read as an I/O error until it is written.
func (st *Store) Lose(block uint64) { C.s4d_store_lose(st.s, C.uint64_t(block)) }

// Read gives block's page back, as a queue would (for the daemon's
// tests; a lost block or a page that fails its hash is an error).
func (st *Store) Read(block uint64, page []byte) error {
	if len(page) != PageSize {
		return fmt.Errorf("read: page of %d bytes", len(page))
	}
	return st.read(block, page)
}

// Fence makes every write fail from now on (EAGAIN: the kernel keeps
// the page), once the writes under way are done; reads are still served.
func (st *Store) Fence() { C.s4d_store_fence(st.s) }

// Writes is the number of writes begun so far: Empty's argument.
func (st *Store) Writes() uint64 { return st.Stats().Writes }

// Empty drops every block (block 0 too unless keep0, or when it is lost)
// and says true, unless a write began since Writes said seen: then it
// drops nothing. For a device seen no longer swap: its blocks hold
// nothing in use, but a swapon right after may have written since.
// Writes during it fail at once (EAGAIN: the kernel keeps the page).
func (st *Store) Empty(seen uint64, keep0 bool) bool {
	k := C.int(0)
	if keep0 {
		k = 1
	}
	return C.s4d_store_empty(st.s, C.uint64_t(seen), k) == 0
}

// Lost says whether block reads as an I/O error (lost with a crash).
func (st *Store) Lost(block uint64) bool {
	return C.s4d_store_kind(st.s, C.uint64_t(block)) == C.S4D_LOST
}
