package slab

import (
	"cmp"
	"slices"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Slab memory registered with a device, so that a GPU engine writes
// objects straight into their slots (the store's direct placing).

// PinnedRegionSlabs is how many slabs one mapping holds when mappings are
// registered with a device: registering costs milliseconds, under the
// store's lock, so it is done for 16 MiB (4 KiB pages) at a time.
const PinnedRegionSlabs = 256

// IdlePinnedKeep is how much idle registered memory the store keeps for
// the next burst: registering a mapping again costs milliseconds under the
// store's lock (on the H100 host, a daemon that had given back all of
// 182 MiB stored its next GiB at 5-6 GB/s instead of 28-31).
const IdlePinnedKeep = 256 << 20

// Pinner registers memory with a device for DMA (an engine that writes
// compressed pages straight into the arena); unpin undoes it. Engines
// implement it (backends.Pinner); the arena needs only this much.
type Pinner interface {
	Pin(mem []byte) (unpin func(), err error)
}

// SetPinner has the arena register every slab mapping it makes from now
// on with p, and keep up to keepIdle bytes of idle registered mappings.
// Slabs emptied in registered memory are kept for reuse rather than their
// pages given back one by one (dropping pages that a device holds would
// leave it writing into pages the store no longer sees); a registered
// mapping none of whose slabs is in use goes back whole, unregistered
// first (Sweep). A mapping that p refuses is used unregistered.
func (a *Arena) SetPinner(p Pinner, keepIdle int) {
	a.mem.pin, a.mem.keepIdle = p, keepIdle
}

// Mappings counts the slab mappings, and of them those registered.
func (a *Arena) Mappings() (all, registered int) {
	return len(a.mem.maps.all), len(a.mem.maps.pinned)
}

// pinnedRange is a slab mapping registered with a device.
type pinnedRange struct {
	lo, hi uintptr
	mem    []byte // the mapping
	unpin  func()
}

// register registers a new mapping with p, if any.
func (r *regions) register(mem []byte, p Pinner) {
	if p == nil {
		return
	}
	unpin, err := p.Pin(mem)
	if err != nil {
		return
	}
	lo := uintptr(unsafe.Pointer(unsafe.SliceData(mem)))
	r.pinned = append(r.pinned, pinnedRange{lo: lo, hi: lo + uintptr(len(mem)), mem: mem, unpin: unpin})
}

// isPinned tells whether a slab lies in a registered mapping.
func (r *regions) isPinned(slab []byte) bool {
	a := addr(slab)
	for _, p := range r.pinned {
		if a >= p.lo && a < p.hi {
			return true
		}
	}
	return false
}

// idleMappings takes out of use the registered mappings none of whose
// slabs is in use (all of them filed for reuse, or never handed out),
// beyond m.keepIdle bytes of them, and returns them, for the caller to
// unregister and unmap outside the store's lock: nothing refers to them
// any more. Under the store's lock.
func (m *slabMem) idleMappings() []pinnedRange {
	r := m.maps
	if len(r.pinned) == 0 {
		return nil
	}
	order := make([]int, len(r.pinned))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(x, y int) int { return cmp.Compare(r.pinned[x].lo, r.pinned[y].lo) })
	of := func(b []byte) int {
		a := addr(b)
		k, _ := slices.BinarySearchFunc(order, a, func(i int, a uintptr) int {
			switch p := r.pinned[i]; {
			case a < p.lo:
				return 1
			case a >= p.hi:
				return -1
			}
			return 0
		})
		if k < len(order) && a >= r.pinned[order[k]].lo && a < r.pinned[order[k]].hi {
			return order[k]
		}
		return -1
	}
	idle := make([]int, len(r.pinned)) // slabs not in use, per mapping
	for _, s := range m.free {
		if i := of(s); i >= 0 {
			idle[i] += len(s) / m.slabSize
		}
	}
	if len(m.rest) > 0 {
		if i := of(m.rest); i >= 0 {
			idle[i] += len(m.rest) / m.slabSize
		}
	}
	drop := make([]bool, len(r.pinned))
	var out []pinnedRange
	kept := 0
	for i, p := range r.pinned {
		if idle[i]*m.slabSize != len(p.mem) {
			continue
		}
		if kept+len(p.mem) <= m.keepIdle {
			kept += len(p.mem)
			continue
		}
		drop[i] = true
		out = append(out, p)
	}
	if len(out) == 0 {
		return nil
	}
	m.free = slices.DeleteFunc(m.free, func(s []byte) bool { i := of(s); return i >= 0 && drop[i] })
	if len(m.rest) > 0 {
		if i := of(m.rest); i >= 0 && drop[i] {
			m.rest = nil
		}
	}
	r.all = slices.DeleteFunc(r.all, func(mm []byte) bool { i := of(mm); return i >= 0 && drop[i] })
	left := r.pinned[:0]
	for i, p := range r.pinned {
		if !drop[i] {
			left = append(left, p)
		}
	}
	clear(r.pinned[len(left):])
	r.pinned = left
	return out
}

// dropMappings unregisters and unmaps mappings idleMappings took out of
// use, and returns their bytes.
func dropMappings(ps []pinnedRange) (bytes uint64) {
	for _, p := range ps {
		p.unpin() // the device lets go of the pages first
		unix.Munmap(p.mem)
		bytes += uint64(len(p.mem))
	}
	return bytes
}

// unpinAll unregisters every mapping, before they are unmapped.
func (r *regions) unpinAll() {
	for _, p := range r.pinned {
		p.unpin()
	}
	r.pinned = nil
}

// keepPinned files the slabs of let that lie in registered mappings for
// reuse at once and returns the others, to give back.
func (a *Arena) keepPinned(let [][]byte) [][]byte {
	if len(a.mem.maps.pinned) == 0 {
		return let
	}
	out := let[:0]
	for _, s := range let {
		if a.mem.maps.isPinned(s) {
			a.mem.reuse([][]byte{s})
		} else {
			out = append(out, s)
		}
	}
	return out
}
