package region

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/s4d-project/s4d/client"
)

// memStore keeps pages uncompressed in a map: enough to test the region's
// side of the contract.
type memStore struct {
	mu    sync.Mutex
	pages map[uint64][]byte
	full  atomic.Bool // refuse every page
	saves atomic.Int64
}

func newMemStore() *memStore { return &memStore{pages: map[uint64][]byte{}} }

func (s *memStore) Save(keys []uint64, pages []byte, size []int32) error {
	s.saves.Add(1)
	ps := len(pages) / len(keys)
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, k := range keys {
		if s.full.Load() {
			size[i] = -1
			continue
		}
		s.pages[k] = bytes.Clone(pages[i*ps : (i+1)*ps])
		size[i] = int32(ps / 4)
	}
	return nil
}

func (s *memStore) Load(keys []uint64, dst []byte) error {
	ps := len(dst) / len(keys)
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, k := range keys {
		p, ok := s.pages[k]
		if !ok {
			panic("load of a page never stored")
		}
		copy(dst[i*ps:], p)
	}
	return nil
}

func (s *memStore) Drop(keys []uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, k := range keys {
		delete(s.pages, k)
	}
}

func (s *memStore) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.pages)
}

// newTestRegion maps size bytes in this process and serves them as a
// region (the fault loop runs on other threads of the same process).
func newTestRegion(t *testing.T, size, budget int) (*Region, []byte, *memStore) {
	t.Helper()
	if _, err := os.Stat("/dev/userfaultfd"); err != nil && os.Geteuid() != 0 {
		t.Skip("no userfaultfd for this user")
	}
	// Threads stopped in a fault hold their Ps: keep some for the fault loop.
	if runtime.GOMAXPROCS(0) < 16 {
		old := runtime.GOMAXPROCS(16)
		t.Cleanup(func() { runtime.GOMAXPROCS(old) })
	}
	rm, err := client.NewRegionMemory(size)
	if err != nil {
		t.Fatal(err)
	}
	st := newMemStore()
	spec := Spec{Uffd: rm.Uffd, Memfd: rm.Memfd, Lifeline: -1, Addr: uint64(uintptr(unsafe.Pointer(&rm.Mem[0]))),
		Length: uint64(size), Budget: uint64(budget), PID: int32(os.Getpid())}
	r, err := New(spec, st, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	mem := rm.Mem
	t.Cleanup(func() {
		r.Close()
		rm.Uffd, rm.Memfd = -1, -1 // the region closed them
		rm.Close()
	})
	return r, mem, st
}

// waitFor polls cond for up to a minute (the machine may be loaded).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for dl := time.Now().Add(time.Minute); !cond(); {
		if time.Now().After(dl) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func TestEvictAndFaultBack(t *testing.T) {
	const pages = 256
	ps := os.Getpagesize()
	r, mem, st := newTestRegion(t, pages*ps, 16*ps)
	for i := 0; i < pages; i++ {
		binary.LittleEndian.PutUint64(mem[i*ps:], uint64(i)*0x9E3779B97F4A7C15)
		mem[i*ps+ps-1] = byte(i)
	}
	waitFor(t, "eviction to the budget", func() bool { return r.Stats().Resident <= 16*uint64(ps) })
	s := r.Stats()
	if s.Evicted == 0 || st.len() == 0 {
		t.Fatalf("nothing evicted: %+v", s)
	}
	for i := 0; i < pages; i++ {
		if got := binary.LittleEndian.Uint64(mem[i*ps:]); got != uint64(i)*0x9E3779B97F4A7C15 || mem[i*ps+ps-1] != byte(i) {
			t.Fatalf("page %d: got %#x", i, got)
		}
	}
	s = r.Stats()
	// Read back in order: read-ahead brings most pages in without a fault.
	if s.Faults == 0 || s.Faults > (pages-16)/4 {
		t.Errorf("%d faults reading %d evicted pages in order", s.Faults, pages-16)
	}
	t.Logf("%+v", s)
}

// TestIntegrityUnderEviction: four threads write random pages while the
// region evicts at the highest rate (budget 0); every page must read back
// as last written, byte for byte.
func TestIntegrityUnderEviction(t *testing.T) {
	const pages = 1024
	ps := os.Getpagesize()
	r, mem, _ := newTestRegion(t, pages*ps, 0)
	// Each page holds its number and a version in every word, so a torn
	// or stale page shows.
	want := make([]atomic.Uint64, pages)
	var wg sync.WaitGroup
	dur := 3 * time.Second
	if testing.Short() {
		dur = time.Second
	}
	stop := time.Now().Add(dur)
	var writes atomic.Int64
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			for time.Now().Before(stop) {
				// Writer w owns the pages i with i%4 == w, so its writes to
				// one page are ordered.
				i := rng.IntN(pages/4)*4 + w
				v := want[i].Load() + 1
				p := mem[i*ps : (i+1)*ps]
				if rng.IntN(4) == 0 {
					// Read and check before writing.
					checkPage(t, p, i, want[i].Load())
				}
				for o := 0; o < ps; o += 8 {
					binary.LittleEndian.PutUint64(p[o:], uint64(i)<<32|v)
				}
				want[i].Store(v)
				writes.Add(1)
			}
		}(w)
	}
	wg.Wait()
	for i := 0; i < pages; i++ {
		checkPage(t, mem[i*ps:(i+1)*ps], i, want[i].Load())
	}
	s := r.Stats()
	t.Logf("%d writes; %+v", writes.Load(), s)
	if s.Evictions == 0 {
		t.Fatal("no evictions happened")
	}
}

func checkPage(t *testing.T, p []byte, i int, v uint64) {
	if v == 0 {
		for _, b := range p {
			if b != 0 {
				t.Errorf("page %d never written holds %d", i, b)
				return
			}
		}
		return
	}
	w := uint64(i)<<32 | v
	for o := 0; o < len(p); o += 8 {
		if got := binary.LittleEndian.Uint64(p[o:]); got != w {
			t.Errorf("page %d word %d: %#x, want %#x", i, o/8, got, w)
			return
		}
	}
}

// TestStoreRefuses: pages the store refuses (quota, memory limit) stay
// resident and intact, over the budget, until it takes them again.
func TestStoreRefuses(t *testing.T) {
	const pages = 128
	ps := os.Getpagesize()
	r, mem, st := newTestRegion(t, pages*ps, 0)
	st.full.Store(true)
	for i := 0; i < pages; i++ {
		mem[i*ps] = byte(i + 1)
	}
	waitFor(t, "a refusal", func() bool { return r.Stats().Refused > 0 })
	if s := r.Stats(); s.Evicted != 0 || s.Err != "" {
		t.Fatalf("%+v", s)
	}
	for i := 0; i < pages; i++ {
		if mem[i*ps] != byte(i+1) {
			t.Fatalf("page %d lost", i)
		}
	}
	st.full.Store(false)
	waitFor(t, "eviction once the store takes pages", func() bool { return r.Stats().Resident == 0 })
	for i := 0; i < pages; i++ {
		if mem[i*ps] != byte(i+1) {
			t.Fatalf("page %d lost", i)
		}
	}
}

// TestSplitMapping: a program that splits the mapping (NumPy advises huge
// pages from one page in) still has every fault served: runs that would
// cross into the next VMA fall back to single pages.
func TestSplitMapping(t *testing.T) {
	const pages = 512
	ps := os.Getpagesize()
	r, mem, _ := newTestRegion(t, pages*ps, 64*ps)
	if err := unix.Madvise(mem[ps:], unix.MADV_HUGEPAGE); err != nil {
		t.Skip("madvise:", err)
	}
	unix.Madvise(mem[5*ps:9*ps], unix.MADV_NOHUGEPAGE) // and a few more VMAs
	// First touches (zero-fill runs), then, once evicted, reads in order
	// (read-ahead runs): both cross the VMAs' edges.
	within(t, func() {
		for i := 0; i < pages; i++ {
			mem[i*ps] = byte(i + 1)
		}
	}, r)
	waitFor(t, "eviction to the budget", func() bool { return r.Stats().Resident <= 64*uint64(ps) })
	within(t, func() {
		for i := 0; i < pages; i++ {
			if mem[i*ps] != byte(i+1) {
				t.Errorf("page %d lost", i)
				return
			}
		}
	}, r)
}

// within runs fn, failing the test if it does not end within a minute
// (a fault that is never served).
func within(t *testing.T, fn func(), r *Region) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); fn() }()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatalf("a fault was never served: %+v", r.Stats())
	}
}
