package cold

import (
	"bytes"
	"testing"

	"github.com/s4d-project/s4d/backends"
	"github.com/s4d-project/s4d/backends/backendtest"
	"github.com/s4d-project/s4d/backends/cpu"
	"github.com/s4d-project/s4d/pagecache"
	"github.com/s4d-project/s4d/pagefmt"
)

// Helpers for tests on a store: pages put, read both ways, and compared.

// The cpu engine compresses what the tests put, as the daemon does.
var (
	fill     = backendtest.CompressCPU
	keysFrom = backendtest.Keys
)

func putOK(t testing.TB, s *pagecache.Store, uid uint32, pool string, keys []uint64, pages []byte) {
	t.Helper()
	b, c := fill(t, pages, s.PageSize())
	res := make([]pagecache.Result, len(keys))
	if err := s.Put(uid, pool, keys, b, c, s.BackendID("cpu"), res); err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		if r != pagecache.OK {
			t.Fatalf("put key %d: %v", keys[i], r)
		}
	}
}

// getAll reads keys through Get, decoding each page.
func getAll(t *testing.T, s *pagecache.Store, uid uint32, pool string, keys []uint64) ([]byte, []pagecache.Result) {
	t.Helper()
	res := make([]pagecache.Result, len(keys))
	st, _, err := s.Get(uid, pool, keys, nil, nil, res)
	if err != nil {
		t.Fatal(err)
	}
	cb, _ := cpu.New(backends.Options{})
	out := make([]byte, len(keys)*s.PageSize())
	for i := range keys {
		if res[i] == pagecache.OK && !cb.DecodePage(st[i], out[i*s.PageSize():(i+1)*s.PageSize()]) {
			t.Fatalf("key %d does not decode", keys[i])
		}
	}
	return out, res
}

// viewAll reads keys through View, the daemon's path, decoding each page.
func viewAll(t *testing.T, s *pagecache.Store, uid uint32, pool string, keys []uint64) ([]byte, []pagecache.Result) {
	t.Helper()
	ps := s.PageSize()
	cb, _ := cpu.New(backends.Options{})
	out := make([]byte, len(keys)*ps)
	res := make([]pagecache.Result, len(keys))
	_, err := s.View(uid, pool, keys, nil, res, func(st []pagefmt.Stored) error {
		for i := range st {
			if res[i] == pagecache.OK && !cb.DecodePage(st[i], out[i*ps:(i+1)*ps]) {
				t.Errorf("key %d does not decode", keys[i])
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out, res
}

// checkAll reads keys through Get and View and compares them with want.
func checkAll(t *testing.T, s *pagecache.Store, uid uint32, pool string, keys []uint64, want []byte) {
	t.Helper()
	for _, read := range []func(*testing.T, *pagecache.Store, uint32, string, []uint64) ([]byte, []pagecache.Result){getAll, viewAll} {
		got, res := read(t, s, uid, pool, keys)
		for i := range keys {
			ps := s.PageSize()
			if res[i] != pagecache.OK || !bytes.Equal(got[i*ps:(i+1)*ps], want[i*ps:(i+1)*ps]) {
				t.Fatalf("key %d: %v, or other bytes", keys[i], res[i])
			}
		}
	}
}
