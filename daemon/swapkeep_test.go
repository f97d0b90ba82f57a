package daemon

import (
	"os"
	"path/filepath"
	"testing"
)

// After a takeover that cannot vouch for every page, a block missing from
// the pool reads as zeros only once written or discarded since: before,
// it may be one whose pages the crash lost.
func TestSwapDistrust(t *testing.T) {
	s := &swapStore{trustAll: true}
	if !s.known(7) {
		t.Fatal("a trusted store refused a missing block")
	}
	s.distrust(130)
	for _, k := range []uint64{0, 63, 64, 129} {
		if s.known(k) {
			t.Fatalf("block %d known before any write", k)
		}
	}
	s.mark([]uint64{63, 64, 129, 500}) // 500: past the end, ignored
	for k, want := range map[uint64]bool{62: false, 63: true, 64: true, 65: false, 129: true, 500: false} {
		if s.known(k) != want {
			t.Fatalf("block %d: known %v, want %v", k, !want, want)
		}
	}
}

// The records a stop leaves are what the next start reads, written whole
// (a rename) beside the socket.
func TestSwapRecords(t *testing.T) {
	dir := t.TempDir()
	d := &Daemon{}
	d.cfg.Socket = filepath.Join(dir, "s4d.sock")
	if recs, err := d.loadSwaps(); err != nil || len(recs.Devices) != 0 {
		t.Fatalf("no file: %+v, %v", recs, err)
	}
	r := swapRecord{ID: 3, N: 2, Size: 1 << 30, Queues: 2, Depth: 64, Codec: "zstd", Prio: 100, Spec: 0}
	d.swaps.devs = []*swapDev{{n: 2, rec: r}}
	d.swaps.orphans = []swapRecord{{ID: 5, N: 4, Size: 1 << 20, Spec: -1}}
	if err := d.saveSwaps(true); err != nil {
		t.Fatal(err)
	}
	recs, err := d.loadSwaps()
	if err != nil || !recs.Clean || len(recs.Devices) != 2 || recs.Devices[0] != r || recs.Devices[1].ID != 5 {
		t.Fatalf("read back %+v, %v", recs, err)
	}
	if _, err := os.Stat(d.swapStatePath() + ".tmp"); !os.IsNotExist(err) {
		t.Fatalf("temporary file left: %v", err)
	}
	if err := os.WriteFile(d.swapStatePath(), []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := d.loadSwaps(); err == nil {
		t.Fatal("a damaged record file was read without an error")
	}
}
