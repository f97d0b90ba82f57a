package daemon

import (
	"bytes"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
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
	s.trustEvery() // emptied after swapoff
	for _, k := range []uint64{0, 62, 65, 128} {
		if !s.known(k) {
			t.Fatalf("block %d not known after trustEvery", k)
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

// A batch of swap-ins gathers several processes' pages: after a crash's
// takeover, a page lost with the crash fails alone, and the batch's other
// pages (written since, or never written) are served.
func TestSwapGetFailsOnlyLostPages(t *testing.T) {
	st := newSwapStore(serveTestDaemon(t), swapPool(1), 1)
	page := bytes.Repeat([]byte("swapped "), 512)
	if err := st.Put([]uint64{1, 2}, append(bytes.Clone(page), page...)); err != nil {
		t.Fatal(err)
	}
	st.distrust(16)
	if err := st.Put([]uint64{2}, page); err != nil { // written since the takeover
		t.Fatal(err)
	}
	if err := st.Delete([]uint64{3}); err != nil { // discarded since: reads as zeros
		t.Fatal(err)
	}
	keys := []uint64{1, 2, 3, 4} // 1 and 4: neither written nor discarded since
	dst := make([]byte, len(keys)*4096)
	missing, failed := make([]bool, len(keys)), make([]bool, len(keys))
	if err := st.Get(keys, dst, missing, failed); err != nil {
		t.Fatalf("the batch failed as a whole: %v", err)
	}
	if want := []bool{true, false, false, true}; !slices.Equal(failed, want) {
		t.Fatalf("failed %v, want %v", failed, want)
	}
	if !bytes.Equal(dst[4096:8192], page) || !missing[2] {
		t.Fatalf("the pages beside the lost ones: block 2 right %v, block 3 missing %v", bytes.Equal(dst[4096:8192], page), missing[2])
	}
	if n := st.lost.Load(); n != 2 {
		t.Errorf("%d lost reads counted, want 2", n)
	}
}

// A device taken over holds pages in use from block 0 on: warming the
// write path must neither delete them nor vouch for them after a crash
// (it used blocks 0 to the batch's size: a restart lost 512 pages and the
// swap header in the guest).
func TestSwapWarmLeavesTheDevicesBlocks(t *testing.T) {
	st := newSwapStore(serveTestDaemon(t), swapPool(1), 1)
	page := bytes.Repeat([]byte("in use  "), 512)
	keys := []uint64{0, 1, 15}
	if err := st.Put(keys, bytes.Repeat(page, len(keys))); err != nil {
		t.Fatal(err)
	}
	st.distrust(16)
	if err := st.warm(128, 16*4096); err != nil {
		t.Fatal(err)
	}
	for _, k := range []uint64{0, 2, 15} {
		if st.known(k) {
			t.Errorf("block %d vouched for by warming", k)
		}
	}
	st.trustAll = true
	dst := make([]byte, len(keys)*4096)
	missing, failed := make([]bool, len(keys)), make([]bool, len(keys))
	if err := st.Get(keys, dst, missing, failed); err != nil {
		t.Fatal(err)
	}
	if slices.Contains(missing, true) || !bytes.Equal(dst, bytes.Repeat(page, len(keys))) {
		t.Fatalf("after warming, blocks 0, 1, 15: missing %v, pages right %v", missing, bytes.Equal(dst, bytes.Repeat(page, len(keys))))
	}
	if p, err := st.d.store.PoolInfo(0, st.pool); err != nil || p.Pages != uint64(len(keys)) {
		t.Fatalf("pool holds %+v, %v: want the %d pages put", p, err, len(keys))
	}
}

// serveTestDaemon serves a cpu daemon in this process until the test ends.
func serveTestDaemon(t *testing.T) *Daemon {
	d, _ := serveDaemon(t, nil)
	return d
}

// Swap seen off empties the device, but for pages written since the
// writes were counted (a swapon right after the swapoff: they are in use,
// and dropping them would make them read back as zeros). After a crash's
// takeover the header is dropped too and the device made fresh.
func TestSwapoffEmptiesOnlyWhatIsNotInUse(t *testing.T) {
	d := serveTestDaemon(t)
	st := newSwapStore(d, swapPool(1), 1)
	sd := &swapDev{st: st, rec: swapRecord{Size: 16 * 4096}}
	page := bytes.Repeat([]byte("swapped "), 512)
	pages := func() uint64 { p, _ := d.store.PoolInfo(0, st.pool); return p.Pages }
	if err := st.Put([]uint64{0, 3, 7}, bytes.Repeat(page, 3)); err != nil {
		t.Fatal(err)
	}
	seen := st.writes.Load()
	if err := st.Put([]uint64{9}, page); err != nil { // swap again, written to
		t.Fatal(err)
	}
	if _, ok := d.emptyAfterSwapoff(sd, seen); ok || pages() != 4 {
		t.Fatalf("written since: emptied %v, %d pages left, want 4", ok, pages())
	}
	if n, ok := d.emptyAfterSwapoff(sd, st.writes.Load()); !ok || n != 3 || pages() != 1 || sd.fresh {
		t.Fatalf("emptied %v, %d dropped, %d left (want 3 and the header), fresh %v", ok, n, pages(), sd.fresh)
	}
	st.distrust(16) // a crash's takeover
	if n, ok := d.emptyAfterSwapoff(sd, st.writes.Load()); !ok || n != 1 || pages() != 0 || !sd.fresh || !st.known(0) || !st.known(15) {
		t.Fatalf("after a crash: emptied %v, %d dropped, %d left, fresh %v, header readable %v", ok, n, pages(), sd.fresh, st.known(0))
	}
}

// A clean record is trusted only with persist and the backing file at the
// checkpoint it names, and is marked not clean before any device serves.
func TestSwapTakeoverTrust(t *testing.T) {
	devs := []swapRecord{{ID: 1, N: 1, Size: 1 << 20, Spec: -1}}
	for _, c := range []struct {
		name    string
		recs    swapRecords
		persist bool
		seq     uint64
		want    bool
	}{
		{"clean, same checkpoint", swapRecords{Clean: true, Seq: 7}, true, 7, true},
		{"clean, the file checkpointed since", swapRecords{Clean: true, Seq: 7}, true, 8, false},
		{"clean, no checkpoint named", swapRecords{Clean: true}, true, 0, false},
		{"clean, no persist", swapRecords{Clean: true, Seq: 7}, false, 7, false},
		{"crash", swapRecords{Seq: 7}, true, 7, false},
	} {
		d := &Daemon{log: slog.New(slog.DiscardHandler)}
		d.cfg.Socket = filepath.Join(t.TempDir(), "s4d.sock")
		d.cfg.Persist = c.persist
		c.recs.Devices = devs
		if err := d.writeSwaps(c.recs); err != nil {
			t.Fatal(err)
		}
		if got := d.beginTakeover(c.recs, c.seq); got != c.want {
			t.Errorf("%s: trusted %v, want %v", c.name, got, c.want)
		}
		recs, err := d.loadSwaps()
		if err != nil || recs.Clean || !slices.Equal(recs.Devices, devs) {
			t.Errorf("%s: records after the mark %+v, %v: want the devices, not clean", c.name, recs, err)
		}
	}
}

// A daemon killed after its first takeover, before the records are
// written again, leaves records the next start does not trust: the device
// served writes the backing file does not hold. The child process is this
// test run again; the parent kills nothing itself (afterTakeover does).
func TestSwapTakeoverCrashWindow(t *testing.T) {
	if dir := os.Getenv("S4D_TEST_SWAP_CRASH"); dir != "" {
		d := &Daemon{log: slog.New(slog.DiscardHandler)}
		d.cfg.Socket = filepath.Join(dir, "s4d.sock")
		d.cfg.Persist = true
		d.swaps.take = func(r swapRecord, trusted bool) (*swapDev, error) {
			if !trusted {
				os.Exit(3) // the last stop was clean at checkpoint 7: this start trusts it
			}
			return &swapDev{n: r.N, rec: r}, nil
		}
		afterTakeover = func() { syscall.Kill(os.Getpid(), syscall.SIGKILL) }
		d.recoverSwaps(7)
		os.Exit(4) // not reached: killed after the first takeover
	}
	dir := t.TempDir()
	d := &Daemon{log: slog.New(slog.DiscardHandler)}
	d.cfg.Socket = filepath.Join(dir, "s4d.sock")
	d.cfg.Persist = true
	devs := []swapRecord{{ID: 1, N: 1, Size: 1 << 20, Spec: -1}, {ID: 2, N: 2, Size: 1 << 20, Spec: 0}}
	if err := d.writeSwaps(swapRecords{Clean: true, Seq: 7, Devices: devs}); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestSwapTakeoverCrashWindow$", "-test.count=1")
	cmd.Env = append(os.Environ(), "S4D_TEST_SWAP_CRASH="+dir)
	out, err := cmd.CombinedOutput()
	ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus)
	if !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("child: %v, want killed inside the window; output:\n%s", err, out)
	}
	recs, err := d.loadSwaps()
	if err != nil || recs.Clean || !slices.Equal(recs.Devices, devs) {
		t.Fatalf("records after the crash: %+v, %v: want both devices, not clean", recs, err)
	}
	var trusted []bool
	d.swaps.take = func(r swapRecord, tr bool) (*swapDev, error) {
		trusted = append(trusted, tr)
		return &swapDev{n: r.N, rec: r}, nil
	}
	if specs := d.recoverSwaps(7); !slices.Equal(specs, []int{0}) || !slices.Equal(trusted, []bool{false, false}) {
		t.Fatalf("next start: specs %v, trusted %v; want [0], none trusted", specs, trusted)
	}
}

// A device a newer daemon served in a form this one does not know is not
// taken over: it stays in the records, untouched, for that daemon.
func TestSwapTakeoverRefusesUnknownIO(t *testing.T) {
	d := &Daemon{log: slog.New(slog.DiscardHandler)}
	d.cfg.Socket = filepath.Join(t.TempDir(), "s4d.sock")
	devs := []swapRecord{{ID: 1, N: 1, Size: 1 << 20, Spec: -1, IO: "io-from-the-future"}, {ID: 2, N: 2, Size: 1 << 20, Spec: 0}}
	if err := d.writeSwaps(swapRecords{Devices: devs}); err != nil {
		t.Fatal(err)
	}
	var took []uint32
	d.swaps.take = func(r swapRecord, tr bool) (*swapDev, error) {
		took = append(took, r.ID)
		return &swapDev{n: r.N, rec: r}, nil
	}
	if specs := d.recoverSwaps(0); !slices.Equal(specs, []int{0}) || !slices.Equal(took, []uint32{2}) {
		t.Fatalf("specs %v, taken %v: want [0] and device 2 alone", specs, took)
	}
	recs, err := d.loadSwaps()
	if err != nil || len(recs.Devices) != 2 || recs.Devices[1] != devs[0] {
		t.Fatalf("records after: %+v, %v: want both, the unknown one kept as it was", recs, err)
	}
}
