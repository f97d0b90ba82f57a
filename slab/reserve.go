package slab

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// MapReserve maps n bytes (whole slabs of slabSize) with every page
// present, for AddReserve. It takes no lock of the store's: it may wait
// for memory, and the store must keep serving meanwhile. Nor does it hold
// the kernel's mmap lock while it waits (Present): it maps the range
// inaccessible, which a process locked with MCL_FUTURE does not populate,
// locks it on fault, opens it, and then faults its pages in.
func MapReserve(n uint64, slabSize int) ([]byte, error) {
	slabs := int(n / uint64(slabSize))
	if slabs == 0 {
		return nil, nil
	}
	r, err := unix.Mmap(-1, 0, slabs*slabSize, unix.PROT_NONE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return nil, fmt.Errorf("reserving slab memory: %w", err)
	}
	// Lock on fault before opening it: a locked private range made
	// writable is populated there and then, under the lock. Refused where
	// the process may not lock (no CAP_IPC_LOCK, a limit): then it locks
	// nothing, and the pages only need faulting in.
	lockOnFault(r)
	if err := unix.Mprotect(r, unix.PROT_READ|unix.PROT_WRITE); err != nil {
		unix.Munmap(r)
		return nil, fmt.Errorf("reserving slab memory: %w", err)
	}
	Present(r)
	return r, nil
}

// AddReserve files memory from MapReserve for new slabs to use before any
// fresh memory. A swap device needs it: its writes come when the machine
// has no free memory left, and a process that must fault in new pages to
// store them may get none (only the kernel's own reclaim may take its
// reserves). With the daemon's memory locked the pages stay present
// until a sweep gives an emptied slab back (unlocking it first: giveBack);
// the refill locks such slabs again before it maps more (Rearm). The
// caller holds the arena's lock.
func (a *Arena) AddReserve(r []byte) uint64 {
	m := &a.mem
	m.maps.all = append(m.maps.all, r)
	m.maps.register(r, m.pin)
	slabs := len(r) / a.slabSize
	for i := 0; i < slabs; i++ {
		m.free = append(m.free, r[i*a.slabSize:(i+1)*a.slabSize:(i+1)*a.slabSize])
	}
	return uint64(slabs * a.slabSize)
}

// Spare is the slab memory ready for new slabs without a fault: reserved
// or emptied and kept.
func (a *Arena) Spare() uint64 {
	return uint64(len(a.mem.free)+len(a.kept)+len(a.keptOld)) * uint64(a.slabSize)
}

// ErrNoSpare refuses a new slab when the arena may map no memory and has
// none reserved or kept.
var ErrNoSpare = errors.New("no reserved slab memory left")

// MapOnlyReserve, on, makes the arena take new slabs only from memory
// reserved (AddReserve) or emptied and kept, never from a fresh mapping:
// Alloc fails with ErrNoSpare instead. A swap device needs it: a mapping
// made while its write waits is filled in direct reclaim, which cannot
// swap its way out when the writer is the swap device's own server; a
// refused write is one the kernel keeps in memory and retries. The
// caller holds the arena's lock.
func (a *Arena) MapOnlyReserve(on bool) { a.mem.noMap = on }
