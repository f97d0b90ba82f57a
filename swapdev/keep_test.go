package swapdev

import (
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
)

// The records a stop leaves are what the next start reads, written whole
// (a rename) beside the socket.
func TestSwapRecords(t *testing.T) {
	s := testSet(t.TempDir(), false)
	if recs, err := s.load(); err != nil || len(recs.Devices) != 0 {
		t.Fatalf("no file: %+v, %v", recs, err)
	}
	r := record{ID: 3, N: 2, Size: 1 << 30, Queues: 2, Depth: 64, Codec: "lz4", Prio: 100, Spec: 0, IO: "native"}
	s.devs = []*device{{n: 2, rec: r}}
	s.orphans = []record{{ID: 5, N: 4, Size: 1 << 20, Spec: -1}}
	if err := s.save(true, 7); err != nil {
		t.Fatal(err)
	}
	recs, err := s.load()
	if err != nil || !recs.Clean || recs.Seq != 7 || len(recs.Devices) != 2 || recs.Devices[0] != r || recs.Devices[1].ID != 5 {
		t.Fatalf("read back %+v, %v", recs, err)
	}
	if s.statePath() != filepath.Join(s.cfg.Dir, "s4d-swap.json") {
		t.Fatalf("records at %s: want s4d-swap.json beside the socket", s.statePath())
	}
	if _, err := os.Stat(s.statePath() + ".tmp"); !os.IsNotExist(err) {
		t.Fatalf("temporary file left: %v", err)
	}
	if err := os.WriteFile(s.statePath(), []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := s.load(); err == nil {
		t.Fatal("a damaged record file was read without an error")
	}
}

// A clean record is trusted only with persist and the backing file at the
// checkpoint it names, and is marked not clean before any device serves.
func TestSwapTakeoverTrust(t *testing.T) {
	devs := []record{{ID: 1, N: 1, Size: 1 << 20, Spec: -1, IO: "native"}}
	for _, c := range []struct {
		name    string
		recs    records
		persist bool
		seq     uint64
		want    bool
	}{
		{"clean, same checkpoint", records{Clean: true, Seq: 7}, true, 7, true},
		{"clean, the file checkpointed since", records{Clean: true, Seq: 7}, true, 8, false},
		{"clean, no checkpoint named", records{Clean: true}, true, 0, false},
		{"clean, no persist", records{Clean: true, Seq: 7}, false, 7, false},
		{"crash", records{Seq: 7}, true, 7, false},
	} {
		s := testSet(t.TempDir(), c.persist)
		c.recs.Devices = devs
		if err := s.write(c.recs); err != nil {
			t.Fatal(err)
		}
		if got := s.beginTakeover(c.recs, c.seq); got != c.want {
			t.Errorf("%s: trusted %v, want %v", c.name, got, c.want)
		}
		recs, err := s.load()
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
		s := testSet(dir, true)
		s.take = func(r record, trusted bool) (*device, error) {
			if !trusted {
				os.Exit(3) // the last stop was clean at checkpoint 7: this start trusts it
			}
			return &device{n: r.N, rec: r}, nil
		}
		afterTakeover = func() { syscall.Kill(os.Getpid(), syscall.SIGKILL) }
		s.recover(7)
		os.Exit(4) // not reached: killed after the first takeover
	}
	dir := t.TempDir()
	s := testSet(dir, true)
	devs := []record{{ID: 1, N: 1, Size: 1 << 20, Spec: -1, IO: "native"}, {ID: 2, N: 2, Size: 1 << 20, Spec: 0, IO: "native"}}
	if err := s.write(records{Clean: true, Seq: 7, Devices: devs}); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestSwapTakeoverCrashWindow$", "-test.count=1")
	cmd.Env = append(os.Environ(), "S4D_TEST_SWAP_CRASH="+dir)
	out, err := cmd.CombinedOutput()
	ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus)
	if !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("child: %v, want killed inside the window; output:\n%s", err, out)
	}
	recs, err := s.load()
	if err != nil || recs.Clean || !slices.Equal(recs.Devices, devs) {
		t.Fatalf("records after the crash: %+v, %v: want both devices, not clean", recs, err)
	}
	var trusted []bool
	s.take = func(r record, tr bool) (*device, error) {
		trusted = append(trusted, tr)
		return &device{n: r.N, rec: r}, nil
	}
	if specs := s.recover(7); !slices.Equal(specs, []int{0}) || !slices.Equal(trusted, []bool{false, false}) {
		t.Fatalf("next start: specs %v, trusted %v; want [0], none trusted", specs, trusted)
	}
}

// A device this daemon cannot serve is not taken over: one a newer
// daemon served in a form this one does not know, or one the removed Go
// path served (io "go", or "" from daemons before the native path). It
// stays in the records, untouched, for the daemon that made it.
func TestSwapTakeoverRefusesUnknownIO(t *testing.T) {
	for _, io := range []string{"io-from-the-future", "go", ""} {
		s := testSet(t.TempDir(), false)
		devs := []record{{ID: 1, N: 1, Size: 1 << 20, Spec: -1, IO: io}, {ID: 2, N: 2, Size: 1 << 20, Spec: 0, IO: "native"}}
		if err := s.write(records{Devices: devs}); err != nil {
			t.Fatal(err)
		}
		var took []uint32
		s.take = func(r record, tr bool) (*device, error) {
			took = append(took, r.ID)
			return &device{n: r.N, rec: r}, nil
		}
		if specs := s.recover(0); !slices.Equal(specs, []int{0}) || !slices.Equal(took, []uint32{2}) {
			t.Fatalf("io %q: specs %v, taken %v: want [0] and device 2 alone", io, specs, took)
		}
		recs, err := s.load()
		if err != nil || len(recs.Devices) != 2 || recs.Devices[1] != devs[0] {
			t.Fatalf("io %q: records after: %+v, %v: want both, the refused one kept as it was", io, recs, err)
		}
	}
}

// testSet is a set whose records live in dir, logging nowhere.
func testSet(dir string, persist bool) *Set {
	return New(Config{PageSize: 4096, Persist: persist, Takeover: true, Dir: dir, Log: slog.New(slog.DiscardHandler)}, nil)
}
