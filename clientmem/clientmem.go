// Package clientmem maps the memfds clients hand over (PUT_FD, GET_FD)
// into the daemon, shares each mapping between the connections that use
// the same file, and registers it with the GPU engines that can read from
// host memory directly.
package clientmem

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/s4d-project/s4d/backends"
)

// Client memfds are mapped whole and kept mapped: a client reuses one
// shared buffer for every request, and mapping it afresh each time (mmap,
// populating thousands of page-table entries, munmap and its TLB
// shootdown) cost more than compressing small batches. A file is mapped
// once for the whole daemon and shared by every connection that hands it
// over: a client that spreads its requests over several connections
// shares one buffer between them, and each connection mapping it again
// would fill the page tables again (two connections' second GET pass over
// 512 MiB took 0.57-0.59 core-s/GB of the daemon instead of 0.36) and
// register it with the GPU again. A connection holds the
// files it used until it closes or they fall out of its own LRU; a file
// no connection holds is unmapped. A memfd is known again by its inode
// while it is mapped (the mapping keeps the inode alive, so the number
// cannot be reused), and it is sealed against shrinking, so a whole-file
// mapping stays valid.
const (
	mapCacheFiles = 8       // memfds held per connection
	mapCacheBytes = 4 << 30 // bytes held per connection
	populateChunk = 2 << 20 // page tables are filled in chunks of this size, on first use
)

// mapKey names one mapping: a file as it was when mapped, and how.
type mapKey struct {
	dev, ino uint64
	size     int64
	writable bool
}

// mapping is one whole memfd mapped in the daemon.
type mapping struct {
	key    mapKey
	mem    []byte
	filled []atomic.Bool // per populateChunk: page tables populated
	unpins []func()      // set by the connection that made it, before it lets go
	users  int           // connections holding it, under Share.mu
}

// Share is the daemon's set of mapped client memfds.
type Share struct {
	mu    sync.Mutex
	files map[mapKey]*mapping
	// pinners returns the backends to register new mappings with.
	pinners func() []backends.Pinner
	log     *slog.Logger
	mapped  int // mappings made, for tests
}

func NewShare(pinners func() []backends.Pinner, log *slog.Logger) *Share {
	return &Share{files: map[mapKey]*mapping{}, pinners: pinners, log: log}
}

// acquire returns the mapping of key, held once more, mapping fd if no
// connection holds one. A read may use a writable mapping of the file.
// made says the caller mapped it and is to pin it.
func (s *Share) acquire(fd int, key mapKey) (m *mapping, made bool, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m = s.files[key]
	if m == nil && !key.writable {
		m = s.files[mapKey{key.dev, key.ino, key.size, true}]
	}
	if m != nil {
		m.users++
		return m, false, nil
	}
	prot := unix.PROT_READ
	if key.writable {
		prot |= unix.PROT_WRITE
	}
	mem, err := unix.Mmap(fd, 0, int(key.size), prot, unix.MAP_SHARED)
	if err != nil {
		return nil, false, fmt.Errorf("mmap: %v", err)
	}
	m = &mapping{key: key, mem: mem, filled: make([]atomic.Bool, (len(mem)+populateChunk-1)/populateChunk), users: 1}
	s.files[key] = m
	s.mapped++
	return m, true, nil
}

// pin registers a new mapping with the backends that can transfer from
// it. It runs outside the lock (registering a GiB takes a while); other
// connections may use the mapping meanwhile, unregistered.
func (s *Share) pin(m *mapping) {
	if s.pinners == nil {
		return
	}
	for _, p := range s.pinners() {
		unpin, err := p.Pin(m.mem)
		if err != nil {
			if s.log != nil {
				s.log.Debug("pinning a client buffer", "bytes", len(m.mem), "err", err)
			}
			continue
		}
		m.unpins = append(m.unpins, unpin)
	}
}

// release lets go of m once; the last holder unmaps it.
func (s *Share) release(m *mapping) {
	s.mu.Lock()
	m.users--
	last := m.users == 0
	if last && s.files[m.key] == m {
		delete(s.files, m.key)
	}
	s.mu.Unlock()
	if last {
		for _, unpin := range m.unpins {
			unpin()
		}
		unix.Munmap(m.mem)
	}
}

// held is a mapping a connection holds.
type held struct {
	m    *mapping
	used uint64 // tick of the last use, for LRU eviction
}

// Cache is one connection's hold on the shared mappings. It is used by
// the connection's goroutine only; NewCache makes one.
type Cache struct {
	share *Share // nil: one of its own is made on first use
	maps  []held
	bytes int
	tick  uint64
}

// NewCache is a connection's hold on share.
func NewCache(share *Share) Cache { return Cache{share: share} }

var errNotSealed = errors.New("the descriptor must be a memfd sealed with F_SEAL_SHRINK")

// Pages returns length bytes at off of the memfd fd (writable if asked).
// The bytes stay mapped until the connection lets the file go, unless
// temp is true: then the caller unmaps them when done (a file too large
// to keep mapped).
func (mc *Cache) Pages(fd int, off uint64, length, pageSize int, write bool) (mem []byte, temp bool, err error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, false, fmt.Errorf("fstat: %v", err)
	}
	key := mapKey{uint64(st.Dev), uint64(st.Ino), st.Size, write}
	h := mc.find(key.dev, key.ino)
	if h >= 0 && (mc.maps[h].m.key.size != st.Size || (write && !mc.maps[h].m.key.writable)) {
		// Grown since (sealing against shrinking does not stop growth),
		// or wanted writable now: let the old mapping go.
		mc.drop(h)
		h = -1
	}
	if h < 0 {
		// Seals are only ever added, so a file held by this connection was
		// checked when it took it. One held by others is checked again: a
		// descriptor is what proves this client may use it.
		seals, err := unix.FcntlInt(uintptr(fd), unix.F_GET_SEALS, 0)
		if err != nil || seals&unix.F_SEAL_SHRINK == 0 {
			return nil, false, errNotSealed
		}
	}
	if off%uint64(pageSize) != 0 || length < 0 || off > uint64(st.Size) || uint64(length) > uint64(st.Size)-off {
		return nil, false, fmt.Errorf("%d bytes at offset %d: outside the %d-byte memfd or not page aligned", length, off, st.Size)
	}
	if st.Size > mapCacheBytes {
		mem, err := mapRange(fd, off, length, write)
		return mem, true, err
	}
	if h < 0 {
		if h, err = mc.take(fd, key); err != nil {
			return nil, false, err
		}
	}
	// A mapping made for another descriptor (of this client or another):
	// this one must allow the access, as mapping it would have required.
	if fl, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0); err != nil || !allows(fl, write) {
		return nil, false, fmt.Errorf("mmap: %v", unix.EACCES)
	}
	mc.tick++
	mc.maps[h].used = mc.tick
	m := mc.maps[h].m
	mem = m.mem[off : off+uint64(length) : off+uint64(length)]
	m.populate(int(off), length)
	return mem, false, nil
}

// allows says whether a descriptor opened with flags fl may be read from
// (and written to, if write).
func allows(fl int, write bool) bool {
	mode := fl & unix.O_ACCMODE
	if write {
		return mode == unix.O_RDWR
	}
	return mode == unix.O_RDONLY || mode == unix.O_RDWR
}

// find returns the index of the held mapping of the file, or -1.
func (mc *Cache) find(dev, ino uint64) int {
	for i, h := range mc.maps {
		if h.m.key.dev == dev && h.m.key.ino == ino {
			return i
		}
	}
	return -1
}

// take holds the shared mapping of the file, making room first.
func (mc *Cache) take(fd int, key mapKey) (int, error) {
	for len(mc.maps) > 0 && (len(mc.maps) >= mapCacheFiles || mc.bytes+int(key.size) > mapCacheBytes) {
		mc.evict()
	}
	if mc.share == nil {
		mc.share = NewShare(nil, nil)
	}
	m, made, err := mc.share.acquire(fd, key)
	if err != nil {
		return -1, err
	}
	if made {
		mc.share.pin(m)
	}
	mc.maps = append(mc.maps, held{m: m})
	mc.bytes += len(m.mem)
	return len(mc.maps) - 1, nil
}

// populate fills the page tables of the chunks under [off, off+length)
// that were not used yet: one call per chunk instead of a fault per page.
func (m *mapping) populate(off, length int) {
	advice := unix.MADV_POPULATE_READ
	if m.key.writable {
		advice = unix.MADV_POPULATE_WRITE
	}
	for c := off / populateChunk; c < len(m.filled) && c*populateChunk < off+length; c++ {
		if m.filled[c].Load() || !m.filled[c].CompareAndSwap(false, true) {
			continue
		}
		lo, hi := c*populateChunk, min((c+1)*populateChunk, len(m.mem))
		// On kernels without it (before 5.14) pages simply fault in on use.
		unix.Madvise(m.mem[lo:hi], advice)
	}
}

// evict lets go of the least recently used mapping.
func (mc *Cache) evict() {
	lru := 0
	for i, h := range mc.maps {
		if h.used < mc.maps[lru].used {
			lru = i
		}
	}
	mc.drop(lru)
}

func (mc *Cache) drop(i int) {
	m := mc.maps[i].m
	mc.maps = append(mc.maps[:i], mc.maps[i+1:]...)
	mc.bytes -= len(m.mem)
	mc.share.release(m)
}

// Close lets go of everything.
func (mc *Cache) Close() {
	for len(mc.maps) > 0 {
		mc.drop(len(mc.maps) - 1)
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
