package tests

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/s4d-project/s4d/backends/corpus"
)

var plain struct {
	once sync.Once
	bin  string
	err  error
}

// plainBin is s4d built without the race detector, whose shadow memory
// alone (about 50 MiB for `s4d --version`) would hide what a client holds.
func plainBin(t *testing.T) string {
	t.Helper()
	plain.once.Do(func() {
		plain.bin = filepath.Join(filepath.Dir(s4dBin), "s4d-plain")
		if out, err := exec.Command("go", "build", "-o", plain.bin, "../cmd/s4d").CombinedOutput(); err != nil {
			plain.err = fmt.Errorf("building s4d without -race: %v\n%s", err, out)
		}
	})
	if plain.err != nil {
		t.Fatal(plain.err)
	}
	return plain.bin
}

// runBounded runs bin and watches its peak RSS (VmHWM in /proc) while it
// runs. It kills the process the moment the peak passes limit bytes, or
// when it has run longer than d, and fails the test then: a client that
// holds every page of a range must not be let grow until the machine
// swaps. The child is reaped here, not by exec.Cmd.Wait, so that /proc
// still has it (a zombie at worst) whenever it is read.
func runBounded(t *testing.T, limit uint64, d time.Duration, bin string, args ...string) (stdout, stderr string, code int, peak uint64) {
	t.Helper()
	dir := t.TempDir()
	so, _ := os.Create(filepath.Join(dir, "stdout"))
	se, _ := os.Create(filepath.Join(dir, "stderr"))
	defer so.Close()
	defer se.Close()
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = so, se // files: no copying goroutines to wait for
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid, start := cmd.Process.Pid, time.Now()
	reap := func(opts int) bool {
		var ws syscall.WaitStatus
		var ru syscall.Rusage
		if n, _ := syscall.Wait4(pid, &ws, opts, &ru); n != pid {
			return false
		}
		peak = max(peak, uint64(ru.Maxrss)<<10) // the kernel's own account of the peak
		code = ws.ExitStatus()
		return true
	}
	for {
		peak = max(peak, vmHWM(t, pid))
		if reap(syscall.WNOHANG) {
			break
		}
		over, late := peak > limit, time.Since(start) > d
		if over || late {
			syscall.Kill(pid, syscall.SIGKILL)
			reap(0)
			t.Fatalf("s4d %s: killed, peak RSS %d MiB (limit %d MiB) after %v (limit %v)",
				strings.Join(args, " "), peak>>20, limit>>20, time.Since(start).Round(time.Millisecond), d)
		}
		time.Sleep(5 * time.Millisecond)
	}
	o, _ := os.ReadFile(so.Name())
	e, _ := os.ReadFile(se.Name())
	return string(o), string(e), code, peak
}

// `ctl get` over the largest range on a small pool streams: the client
// stays under 64 MiB, the pages land at their keys, the missing keys are
// holes and counted, and the command exits 3 saying how many (issue 26:
// it used to hold every page, 19 GiB after 60 s). put streams its file and
// del counts what it deleted and what was missing.
func TestCtlStreamsPages(t *testing.T) {
	if testing.Short() {
		t.Skip("16M keys: a minute under the race detector")
	}
	bin := plainBin(t)
	d := start(t)
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	data := corpus.Pages(corpus.Text, 2048, 4096, 1)
	os.WriteFile(src, data, 0o644)
	d.mustCtl("put", "--pool", "p", "--file", src)
	const limit = 64 << 20

	out := filepath.Join(dir, "out")
	_, stderr, code, peak := runBounded(t, limit, 4*time.Minute, bin, "ctl", "--socket", d.socket, "--timeout", "5m",
		"get", "--pool", "p", "--keys", "0-16777215", "--out", out)
	t.Logf("get of 16M keys: peak RSS %d MiB", peak>>20)
	if code != 3 || !strings.Contains(stderr, "16775168 of 16777216 keys") {
		t.Fatalf("get with keys missing: exit %d, want 3 and how many\n%s", code, stderr)
	}
	f, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var st syscall.Stat_t
	if err := syscall.Fstat(int(f.Fd()), &st); err != nil {
		t.Fatal(err)
	}
	if st.Size != 1<<24*4096 || st.Blocks*512 > 32<<20 {
		t.Fatalf("out: %d bytes taking %d on disk; want 64 GiB, sparse (8 MiB of pages)", st.Size, st.Blocks*512)
	}
	got := make([]byte, len(data))
	if _, err := f.ReadAt(got, 0); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("the stored pages did not come back at their keys: %v", err)
	}
	hole := make([]byte, 4096)
	if _, err := f.ReadAt(hole, 1<<35); err != nil || !bytes.Equal(hole, make([]byte, 4096)) {
		t.Fatalf("a missing key's page does not read as zeros: %v", err)
	}

	// 96 MiB of zero pages (a sparse file): more than the limit, read a
	// request at a time.
	big := filepath.Join(dir, "big")
	os.WriteFile(big, nil, 0o644)
	os.Truncate(big, 96<<20)
	stdout, stderr, code, peak := runBounded(t, limit, 2*time.Minute, bin, "ctl", "--socket", d.socket, "put", "--pool", "z", "--file", big)
	t.Logf("put of 96 MiB: peak RSS %d MiB", peak>>20)
	if code != 0 || stdout != "stored 24576 pages in pool z, keys 0-24575\n" {
		t.Fatalf("put 96 MiB: exit %d\n%s%s", code, stdout, stderr)
	}

	stdout, stderr, code, _ = runBounded(t, limit, time.Minute, bin, "ctl", "--socket", d.socket, "del", "--pool", "p", "--keys", "1024-4095")
	if code != 3 || !strings.Contains(stdout, "deleted 1024 of 3072 pages") || !strings.Contains(stderr, "2048 of 3072 keys") {
		t.Fatalf("del with keys missing: exit %d, want 3 and how many deleted and missing\n%s%s", code, stdout, stderr)
	}
}
