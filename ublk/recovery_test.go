package ublk

import (
	"bytes"
	"testing"

	"golang.org/x/sys/unix"
)

// After a crash's takeover the store fails the pages it cannot vouch for
// one by one: a batch gathered from several processes' swap-ins must fail
// only the requests holding such a page, and serve the others.
func TestGatherFailsOnlyRequestsWithAFailedPage(t *testing.T) {
	st := newMemStore()
	st.bad = map[uint64]bool{5: true}
	for _, k := range []uint64{4, 6, 9} {
		st.pages[k] = filled(4096, byte(k))
	}
	g := newGatherer(st, 4096, 4, 8192, new(Stats))
	reqs := []Request{
		{Op: OpRead, Sector: 4 * 8, Count: 16, Buf: make([]byte, 8192)}, // blocks 4-5: 5 failed
		{Op: OpRead, Sector: 6 * 8, Count: 8, Buf: make([]byte, 8192)},  // block 6
		{Op: OpRead, Sector: 9 * 8, Count: 8, Buf: make([]byte, 8192)},  // block 9
	}
	res := make([]int32, len(reqs))
	g.serve(reqs, res)
	if st.gets != 1 {
		t.Fatalf("%d Get calls, want one for the batch", st.gets)
	}
	if res[0] != -int32(unix.EIO) {
		t.Errorf("the request holding the failed page: result %d, want EIO", res[0])
	}
	for i, k := range []uint64{6, 9} {
		r := reqs[i+1]
		if res[i+1] != 4096 || !bytes.Equal(r.Buf[:4096], filled(4096, byte(k))) {
			t.Errorf("block %d, beside a failed page in the batch: result %d, page right %v", k, res[i+1], bytes.Equal(r.Buf[:4096], filled(4096, byte(k))))
		}
	}
	// The next batch starts with no page failed.
	st.bad = nil
	g.serve(reqs[:1], res[:1])
	if res[0] != 8192 {
		t.Errorf("block 5 no longer failed: result %d, want 8192", res[0])
	}
}
