package swapdev

import (
	"bytes"
	"encoding/binary"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/s4d-project/s4d/swapio"
)

func nativeTestStore(t testing.TB, size uint64) *swapio.Store {
	t.Helper()
	if err := swapio.Available(); err != nil {
		t.Skip(err)
	}
	st, err := swapio.NewStore(size, swapio.Options{})
	if err != nil {
		t.Skip("native store not made here:", err)
	}
	t.Cleanup(st.Close)
	return st
}

// nativePage is block b's page: compressible, unique to b.
func nativePage(b uint64) []byte {
	p := bytes.Repeat([]byte("native swap page "), 4096/17+1)[:4096]
	binary.LittleEndian.PutUint64(p[64:], b*0x9e3779b97f4a7c15)
	binary.LittleEndian.PutUint64(p[2048:], b)
	return p
}

// A persisted stop's pages go from a native store through the daemon's
// store (here a map: the daemon's own is tested with its side,
// daemon/swappool_test.go) into the next daemon's native store: every
// page as written, zero blocks as zeros, blocks lost with an earlier
// crash still lost.
func TestNativeExportImport(t *testing.T) {
	const size = 64 << 20
	store := &mapStore{}
	s := New(Config{Log: slog.New(slog.DiscardHandler)}, store)
	store.Put(poolName(7), []uint64{size/4096 + 1}, make([]byte, 4096)) // an older run's: block 1 lost, which it is not now
	src := nativeTestStore(t, size)
	scratch := make([]byte, 4096)
	n := uint64(size / 4096)
	var wrote int
	for b := uint64(0); b < n; b += 2 {
		if err := src.Import(b, nativePage(b), scratch); err != nil {
			t.Fatal(err)
		}
		wrote++
	}
	src.MarkLost() // a crash's takeover: every block not written is lost
	for b := uint64(1); b < n; b += 4 {
		if err := src.Import(b, make([]byte, 4096), scratch); err != nil { // written since: zeros
			t.Fatal(err)
		}
	}
	sd := &device{n: 7, nat: src, rec: record{ID: 9, N: 7, Size: size}}
	t0 := time.Now()
	if err := s.export(sd); err != nil {
		t.Fatal(err)
	}
	t1 := time.Now()
	if store.has(poolName(7), n+1) {
		t.Fatal("an older run's page was not dropped before the export")
	}
	dst := nativeTestStore(t, size)
	held, err := importNative(dst, store.Pages(poolName(7)), n)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d pages: export %v, import %v", wrote, t1.Sub(t0), time.Since(t1))
	if held != uint64(wrote) {
		t.Fatalf("imported %d pages, want %d", held, wrote)
	}
	page := make([]byte, 4096)
	for b := uint64(0); b < n; b++ {
		err := dst.Read(b, page)
		switch {
		case b%2 == 0:
			if err != nil || !bytes.Equal(page, nativePage(b)) {
				t.Fatalf("block %d: %v or wrong page", b, err)
			}
		case b%4 == 1:
			if err != nil || !bytes.Equal(page, make([]byte, 4096)) {
				t.Fatalf("zero block %d: %v", b, err)
			}
		default:
			if err == nil || !dst.Lost(b) {
				t.Fatalf("block %d lost with the crash was served", b)
			}
		}
	}
}

// mapStore is a Store in memory: pages by pool and key, as given.
type mapStore struct {
	mu    sync.Mutex
	pools map[string]map[uint64][]byte
}

type mapPages struct {
	s    *mapStore
	pool string
}

func (m *mapStore) Pages(pool string) Pages { return mapPages{m, pool} }

func (m *mapStore) Put(pool string, keys []uint64, pages []byte) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.pools == nil {
		m.pools = map[string]map[uint64][]byte{}
	}
	if m.pools[pool] == nil {
		m.pools[pool] = map[uint64][]byte{}
	}
	for i, k := range keys {
		m.pools[pool][k] = bytes.Clone(pages[i*4096 : (i+1)*4096])
	}
}

func (m *mapStore) has(pool string, k uint64) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, ok := m.pools[pool][k]
	return ok
}

func (m *mapStore) Drop(pool string, n uint64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for k := range m.pools[pool] {
		if k < n {
			delete(m.pools[pool], k)
		}
	}
}

func (p mapPages) Put(keys []uint64, pages []byte) error {
	p.s.Put(p.pool, keys, pages)
	return nil
}

func (p mapPages) Get(keys []uint64, dst []byte, missing, failed []bool) error {
	p.s.mu.Lock()
	defer p.s.mu.Unlock()
	for i, k := range keys {
		page, ok := p.s.pools[p.pool][k]
		missing[i] = !ok
		if !ok {
			page = make([]byte, 4096)
		}
		copy(dst[i*4096:(i+1)*4096], page)
	}
	return nil
}
