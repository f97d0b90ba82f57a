package daemon

import (
	"errors"
	"fmt"
	"log/slog"

	"golang.org/x/sys/unix"

	"github.com/s4d-project/s4d/backends"
)

// A connection keeps the memfds its client hands over mapped, whole, until
// it closes: a client reuses one shared buffer for every request, and
// mapping it afresh each time (mmap, populating thousands of page-table
// entries, munmap and its TLB shootdown) cost more than compressing small
// batches. A memfd is known again by its inode while we hold it mapped (the
// mapping keeps the inode alive, so the number cannot be reused), and it is
// sealed against shrinking, so a whole-file mapping stays valid.
const (
	mapCacheFiles = 8       // memfds kept mapped per connection
	mapCacheBytes = 4 << 30 // bytes kept mapped per connection
	populateChunk = 2 << 20 // page tables are filled in chunks of this size, on first use
)

// mapping is one whole memfd mapped in the daemon.
type mapping struct {
	dev, ino uint64
	mem      []byte
	writable bool
	filled   []bool // per populateChunk: page tables populated
	unpins   []func()
	used     uint64 // tick of the last use, for LRU eviction
}

// mapCache holds a connection's mappings. It is used by the connection's
// goroutine only.
type mapCache struct {
	maps  []*mapping
	bytes int
	tick  uint64
	// pinners returns the backends to register new mappings with.
	pinners func() []backends.Pinner
	log     *slog.Logger
	mapped  int // mappings made, for tests
}

var errNotSealed = errors.New("the descriptor must be a memfd sealed with F_SEAL_SHRINK")

// pages returns length bytes at off of the memfd fd (writable if asked).
// The bytes stay mapped until the cache closes or evicts the file, unless
// temp is true: then the caller unmaps them when done (a file too large
// to keep mapped).
func (mc *mapCache) pages(fd int, off uint64, length, pageSize int, write bool) (mem []byte, temp bool, err error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, false, fmt.Errorf("fstat: %v", err)
	}
	m := mc.find(uint64(st.Dev), uint64(st.Ino))
	if m == nil {
		// Seals are only ever added, so a file found in the cache was
		// checked when it was mapped.
		seals, err := unix.FcntlInt(uintptr(fd), unix.F_GET_SEALS, 0)
		if err != nil || seals&unix.F_SEAL_SHRINK == 0 {
			return nil, false, errNotSealed
		}
	}
	if off%uint64(pageSize) != 0 || length < 0 || off > uint64(st.Size) || uint64(length) > uint64(st.Size)-off {
		return nil, false, fmt.Errorf("%d bytes at offset %d: outside the %d-byte memfd or not page aligned", length, off, st.Size)
	}
	if m != nil && write && m.writable {
		// Mapped writable for an earlier descriptor of the same file: this
		// one must allow writing too, as mapping it would have required.
		if fl, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0); err != nil || fl&unix.O_ACCMODE != unix.O_RDWR {
			return nil, false, fmt.Errorf("mmap: %v", unix.EACCES)
		}
	}
	if m != nil && (int64(len(m.mem)) != st.Size || (write && !m.writable)) {
		// Grown since (sealing against shrinking does not stop growth),
		// or wanted writable now: map it again.
		mc.drop(m)
		m = nil
	}
	if m == nil {
		if st.Size > mapCacheBytes {
			mem, err := mapRange(fd, off, length, write)
			return mem, true, err
		}
		if m, err = mc.add(fd, int(st.Size), uint64(st.Dev), uint64(st.Ino), write); err != nil {
			return nil, false, err
		}
	}
	mc.tick++
	m.used = mc.tick
	mem = m.mem[off : off+uint64(length) : off+uint64(length)]
	m.populate(int(off), length)
	return mem, false, nil
}

func (mc *mapCache) find(dev, ino uint64) *mapping {
	for _, m := range mc.maps {
		if m.dev == dev && m.ino == ino {
			return m
		}
	}
	return nil
}

// add maps the whole file, writable only if asked (GET_FD writes into it;
// PUT_FD only reads, and the file may be sealed against writing), and
// registers it with the backends that can transfer from it.
func (mc *mapCache) add(fd, size int, dev, ino uint64, write bool) (*mapping, error) {
	for len(mc.maps) > 0 && (len(mc.maps) >= mapCacheFiles || mc.bytes+size > mapCacheBytes) {
		mc.evict()
	}
	prot := unix.PROT_READ
	if write {
		prot |= unix.PROT_WRITE
	}
	mem, err := unix.Mmap(fd, 0, size, prot, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("mmap: %v", err)
	}
	m := &mapping{dev: dev, ino: ino, mem: mem, writable: write,
		filled: make([]bool, (size+populateChunk-1)/populateChunk)}
	if mc.pinners != nil {
		for _, p := range mc.pinners() {
			unpin, err := p.Pin(m.mem)
			if err != nil {
				if mc.log != nil {
					mc.log.Debug("pinning a client buffer", "bytes", size, "err", err)
				}
				continue
			}
			m.unpins = append(m.unpins, unpin)
		}
	}
	mc.maps = append(mc.maps, m)
	mc.bytes += size
	mc.mapped++
	return m, nil
}

// populate fills the page tables of the chunks under [off, off+length)
// that were not used yet: one call per chunk instead of a fault per page.
func (m *mapping) populate(off, length int) {
	advice := unix.MADV_POPULATE_READ
	if m.writable {
		advice = unix.MADV_POPULATE_WRITE
	}
	for c := off / populateChunk; c < len(m.filled) && c*populateChunk < off+length; c++ {
		if m.filled[c] {
			continue
		}
		m.filled[c] = true
		lo, hi := c*populateChunk, min((c+1)*populateChunk, len(m.mem))
		// On kernels without it (before 5.14) pages simply fault in on use.
		unix.Madvise(m.mem[lo:hi], advice)
	}
}

// evict drops the least recently used mapping.
func (mc *mapCache) evict() {
	lru := mc.maps[0]
	for _, m := range mc.maps {
		if m.used < lru.used {
			lru = m
		}
	}
	mc.drop(lru)
}

func (mc *mapCache) drop(m *mapping) {
	for i, x := range mc.maps {
		if x == m {
			mc.maps = append(mc.maps[:i], mc.maps[i+1:]...)
			break
		}
	}
	mc.bytes -= len(m.mem)
	for _, unpin := range m.unpins {
		unpin()
	}
	unix.Munmap(m.mem)
}

// close unmaps everything.
func (mc *mapCache) close() {
	for len(mc.maps) > 0 {
		mc.drop(mc.maps[0])
	}
}

// mapRange maps length bytes at off for one request, populated at once.
func mapRange(fd int, off uint64, length int, write bool) ([]byte, error) {
	prot := unix.PROT_READ
	if write {
		prot |= unix.PROT_WRITE
	}
	mem, err := unix.Mmap(fd, int64(off), length, prot, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		return nil, fmt.Errorf("mmap: %v", err)
	}
	return mem, nil
}

// pinners lists the usable backends that can register host memory.
func (d *Daemon) pinners() []backends.Pinner {
	var out []backends.Pinner
	for _, b := range d.set.Usable() {
		if p, ok := b.(backends.Pinner); ok {
			out = append(out, p)
		}
	}
	return out
}
