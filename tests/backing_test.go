package tests

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/s4d-project/s4d/backends/corpus"
	"github.com/s4d-project/s4d/client"
	"github.com/s4d-project/s4d/ipc"
)

// backingFile makes a preallocated file of size bytes on a filesystem that
// takes O_DIRECT, or skips saying why there is none.
func backingFile(t testing.TB, size int64) string {
	t.Helper()
	dir := t.TempDir()
	p := filepath.Join(dir, "backing")
	if out, err := exec.Command("fallocate", "-l", strconv.FormatInt(size, 10), p).CombinedOutput(); err != nil {
		// Not every filesystem preallocates: a sparse file does as well.
		os.WriteFile(p, nil, 0o600)
		if err := os.Truncate(p, size); err != nil {
			t.Fatalf("fallocate: %v %s", err, out)
		}
	}
	f, err := os.OpenFile(p, os.O_RDWR|syscall.O_DIRECT, 0)
	if err != nil {
		t.Skipf("%s does not take O_DIRECT (%v): set TMPDIR to a disk filesystem", dir, err)
	}
	f.Close()
	return p
}

// stop sends SIGTERM and waits for a clean exit.
func (d *daemon) stop() {
	d.t.Helper()
	d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-d.done:
		d.done <- err
		if err != nil {
			d.t.Fatalf("exit after SIGTERM: %v\n%s", err, d.log.String())
		}
	case <-time.After(60 * time.Second):
		d.t.Fatal("daemon did not exit after SIGTERM")
	}
}

// putParallel stores pages under keys 0.. of pool from clients
// connections at once, in batches of 1024 pages, and fails on any refusal.
func putParallel(t testing.TB, d *daemon, pool string, pages []byte, clients int) time.Duration {
	t.Helper()
	n := len(pages) / 4096
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	t0 := time.Now()
	for g := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := d.client()
			for lo := g * 1024; lo < n; lo += clients * 1024 {
				hi := min(lo+1024, n)
				codes, err := c.Put(ctx(t), pool, keys(uint64(lo), hi-lo), pages[lo*4096:hi*4096])
				if err == nil {
					err = ipc.PageError(keys(uint64(lo), hi-lo), codes)
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	el := time.Since(t0)
	close(errs)
	for err := range errs {
		t.Fatalf("put: %v", err)
	}
	return el
}

// getAll reads keys 0.. back and compares them with pages.
func checkPages(t testing.TB, d *daemon, pool string, pages []byte) time.Duration {
	t.Helper()
	c := d.client()
	n := len(pages) / 4096
	t0 := time.Now()
	for lo := 0; lo < n; lo += 4096 {
		hi := min(lo+4096, n)
		got, codes, err := c.Get(ctx(t), pool, keys(uint64(lo), hi-lo))
		if err == nil {
			err = ipc.PageError(keys(uint64(lo), hi-lo), codes)
		}
		if err != nil {
			t.Fatalf("get %d-%d: %v", lo, hi-1, err)
		}
		if !bytes.Equal(got, pages[lo*4096:hi*4096]) {
			t.Fatalf("pages %d-%d came back different", lo, hi-1)
		}
	}
	return time.Since(t0)
}

func statsOf(t testing.TB, d *daemon) *ipc.Stats {
	t.Helper()
	st, err := d.client().Stats(ctx(t), "")
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// Past the memory limit pages go to the backing file, not refused, and
// come back byte for byte; a planned restart with persist loses none.
// S4D_MEASURE=1 runs it over 512 MiB against a 64 MiB limit and prints
// the figures (on S4D_BACKING if set: a file or device that may be
// overwritten); run it with -bench NONE for a build without the race
// detector.
func TestBackingWritebackAndRestart(t *testing.T) {
	size, limit, fileSize := 48<<20, "8M", int64(256<<20)
	measure := os.Getenv("S4D_MEASURE") != ""
	if measure {
		size, limit, fileSize = 512<<20, "64M", 1<<30
	}
	path := os.Getenv("S4D_BACKING")
	if path == "" {
		path = backingFile(t, fileSize)
	} else if f, err := os.OpenFile(path, os.O_WRONLY, 0); err != nil {
		t.Fatal(err)
	} else { // a fresh start: its headers wiped
		f.WriteAt(make([]byte, 8192), 0)
		f.Sync()
		f.Close()
	}
	pages := corpus.Pages(corpus.Mixed, size/4096, 4096, 17)
	args := []string{"--mem-limit", limit, "--backing-file", path, "--persist", "true", "--checkpoint-interval", "0"}
	if v := os.Getenv("S4D_BACKING_VERIFY"); v != "" { // to measure what reading writes back costs
		args = append(args, "--backing-verify", v)
	}
	d := start(t, args...)
	putTime := putParallel(t, d, "cold", pages, 2)
	st := statsOf(t, d)
	if st.IO.NoSpace != 0 || st.Backing == nil || st.Backing.Pages == 0 || st.Mem.MemUsedMax > st.Mem.MemLimit {
		t.Fatalf("no space %d, limit %d, most used %d, backing %+v", st.IO.NoSpace, st.Mem.MemLimit, st.Mem.MemUsedMax, st.Backing)
	}
	getTime := checkPages(t, d, "cold", pages)
	st2 := statsOf(t, d)
	b := st2.Backing
	if b.PagesRead == 0 || b.Reads >= b.PagesRead {
		t.Fatalf("reads not batched: %d I/Os for %d pages", b.Reads, b.PagesRead)
	}
	out := d.mustCtl("stats")
	if !strings.Contains(out, "BACKING-FILE") || !strings.Contains(out, path) {
		t.Fatalf("ctl stats shows no backing file:\n%s", out)
	}
	if measure {
		t.Logf("PUT %d MiB by 2 clients, --mem-limit %s: %.2f GB/s; %d pages (%d MiB) written in %d I/Os, %.2f GB/s of writes",
			size>>20, limit, float64(size)/putTime.Seconds()/1e9, st.Backing.PagesWritten, st.Backing.BytesWritten>>20,
			st.Backing.Writes, float64(st.Backing.BytesWritten)/st.Backing.WriteSeconds/1e9)
		t.Logf("GET all back: %.2f GB/s of pages; %d pages read from the file in %d I/Os (%d MiB), mean %.0f us, p99 <= %d us",
			float64(size)/getTime.Seconds()/1e9, b.PagesRead, b.Reads, b.BytesRead>>20, b.ReadMeanUS, b.ReadP99US)
	}

	// A planned restart: every page is written out, then restored before
	// the daemon answers.
	d.stop()
	t0 := time.Now()
	d2 := start(t, args...)
	restore := time.Since(t0)
	if measure {
		for _, l := range strings.Split(d.log.String()+d2.log.String(), "\n") {
			if strings.Contains(l, "pages persisted") || strings.Contains(l, "pages_restored") {
				t.Log(l)
			}
		}
	}
	st3 := statsOf(t, d2)
	if st3.Mem.Pages != st2.Mem.Pages || st3.Mem.ComprDataSize != st2.Mem.ComprDataSize || st3.Backing.Pages != st3.Mem.Pages-st3.Mem.ZeroPages {
		t.Fatalf("after restart: %d pages (%d bytes), before %d (%d); on the file %d", st3.Mem.Pages, st3.Mem.ComprDataSize,
			st2.Mem.Pages, st2.Mem.ComprDataSize, st3.Backing.Pages)
	}
	if len(st3.Pools) != 1 || st3.Pools[0].UID != uint32(os.Getuid()) {
		t.Fatalf("pools after restart: %+v", st3.Pools)
	}
	getTime2 := checkPages(t, d2, "cold", pages)
	if measure {
		t.Logf("restart: daemon answering %.2f s after start (%.2f s per GB of pages), all %d pages back, read at %.2f GB/s",
			restore.Seconds(), restore.Seconds()/(float64(size)/1e9), st3.Mem.Pages, float64(size)/getTime2.Seconds()/1e9)
	}
	if out := d2.mustCtl("writeback", "huge"); !strings.Contains(out, "wrote back") {
		t.Fatalf("ctl writeback: %s", out)
	}
	if out, err := d2.ctl("writeback", "cold"); err == nil || !strings.Contains(out, "want all, idle, huge or compact") {
		t.Fatalf("ctl writeback cold: %v %s", err, out)
	}
	d2.mustCtl("writeback", "compact")
}

// After kill -9, the last checkpoint comes back (here the one a forced
// writeback records); pages stored after it are missing, never wrong.
func TestBackingCrash(t *testing.T) {
	path := backingFile(t, 64<<20)
	args := []string{"--mem-limit", "4M", "--backing-file", path, "--persist", "true", "--checkpoint-interval", "0"}
	d := start(t, args...)
	v1 := corpus.Pages(corpus.Mixed, 2048, 4096, 31)
	putParallel(t, d, "p", v1, 1)
	d.mustCtl("writeback", "all") // a checkpoint
	c := d.client()
	v2 := corpus.Pages(corpus.Text, 512, 4096, 32)
	allOKPut(t, c, "p", keys(0, 512), v2)                          // replaces pages of the checkpoint
	allOKPut(t, c, "p", keys(5000, 512), v2)                       // new pages
	if _, err := c.Del(ctx(t), "p", keys(1000, 100)); err != nil { // frees some
		t.Fatal(err)
	}
	d.cmd.Process.Kill()
	<-d.done
	d.done <- nil

	// The pool changed after the checkpoint: none of its pages comes back
	// (the checkpoint's would be older than the last write), and the start
	// says so.
	d2 := start(t, args...)
	for _, ks := range [][]uint64{keys(0, 2048), keys(5000, 512)} {
		_, codes, err := d2.client().Get(ctx(t), "p", ks)
		if err != nil {
			t.Fatal(err)
		}
		for i, code := range codes {
			if code != ipc.CodeNotFound {
				t.Fatalf("key %d of a pool changed after the checkpoint: %v", ks[i], code)
			}
		}
	}
	st := statsOf(t, d2)
	if st.IO.ChecksumErrors != 0 {
		t.Fatalf("%d checksum errors", st.IO.ChecksumErrors)
	}
	if b := st.Backing; b.LostAtStart != 2048 || len(b.ChangedPoolsAtStart) != 1 || b.ChangedPoolsAtStart[0] != "p" {
		t.Fatalf("reported lost: %d pages, pools %v; want 2048 and p", b.LostAtStart, b.ChangedPoolsAtStart)
	}
	if !strings.Contains(d2.log.String(), "pages_lost=2048") {
		t.Fatalf("the loss is not in the log:\n%s", d2.log.String())
	}
}

// Files that cannot be used are refused with a message, and left as they were.
func TestBackingRefused(t *testing.T) {
	path := backingFile(t, 16<<20)
	// A file with a checkpoint to damage.
	args := []string{"--backing-file", path, "--persist", "true"}
	d := start(t, args...)
	allOKPut(t, d.client(), "p", keys(0, 64), corpus.Pages(corpus.Text, 64, 4096, 3))
	d.stop()
	good, _ := os.ReadFile(path)

	refused := func(name, want string, extra ...string) {
		t.Helper()
		before, _ := os.ReadFile(path)
		cmd := exec.Command(s4dBin, append([]string{"daemon", "--socket", filepath.Join(t.TempDir(), "s.sock")}, append(args, extra...)...)...)
		out, err := cmd.CombinedOutput()
		if err == nil || !strings.Contains(string(out), want) {
			t.Fatalf("%s: want an error naming %q, got %v:\n%s", name, want, err, out)
		}
		if after, _ := os.ReadFile(path); !bytes.Equal(before, after) {
			t.Fatalf("%s: the refused file was changed", name)
		}
	}
	damaged := bytes.Clone(good)
	damaged[30] ^= 0x40
	damaged[4096+30] ^= 0x40
	os.WriteFile(path, damaged, 0o600)
	refused("damaged header", "header checksum mismatch")

	other := bytes.Clone(good)
	copy(other[:8], "NOTOURS!")
	copy(other[4096:4096+8], "NOTOURS!")
	os.WriteFile(path, other, 0o600)
	refused("foreign file", "not an s4d backing file")
	refused("foreign file without persist", "not an s4d backing file", "--persist", "false")

	os.WriteFile(path, good, 0o600)
	refused("other page size", "pages of 4096 bytes", "--page-size", "8192", "--max-batch-pages", "1024")

	os.Truncate(path, 64<<10)
	refused("too small", "too small")
	refused("missing", "does not exist", "--backing-file", path+".none")
	refused("persist alone", "persist needs a backing file", "--backing-file", "")
}

// Write and read errors (injected) are counted, the pages stay in RAM,
// nothing stored is lost, and no page is returned wrong.
func TestBackingIOFault(t *testing.T) {
	bin := faultBinary(t)
	faults := t.TempDir()
	t.Setenv("S4D_FAULT_DIR", faults)
	path := backingFile(t, 64<<20)
	d := startBin(t, bin, "--mem-limit", "2M", "--backing-file", path)
	c := d.client()
	first := corpus.Pages(corpus.Mixed, 1024, 4096, 41)
	allOKPut(t, c, "f", keys(0, 1024), first) // past the limit: some on the file

	os.WriteFile(filepath.Join(faults, "backing-write"), nil, 0o644)
	more := corpus.Pages(corpus.Random, 1024, 4096, 42)
	codes, err := c.Put(ctx(t), "f", keys(10000, 1024), more)
	if err != nil {
		t.Fatal(err)
	}
	refused := 0
	for _, code := range codes {
		if code == ipc.CodeNoSpace {
			refused++
		}
	}
	st := statsOf(t, d)
	if refused == 0 || st.Backing.Failures == 0 || !strings.Contains(st.Backing.LastError, "input/output error") {
		t.Fatalf("write fault: %d refused, backing %+v", refused, st.Backing)
	}
	checkPages(t, d, "f", first)
	os.Remove(filepath.Join(faults, "backing-write"))
	allOKPut(t, c, "f", keys(10000, 1024), more)

	os.WriteFile(filepath.Join(faults, "backing-read"), nil, 0o644)
	_, codes, err = c.Get(ctx(t), "f", keys(0, 1024))
	if err != nil {
		t.Fatal(err)
	}
	failed := 0
	for _, code := range codes {
		if code == ipc.CodeFailed {
			failed++
		} else if code != ipc.OK {
			t.Fatalf("read fault: %v", code)
		}
	}
	if st := statsOf(t, d); failed == 0 || st.Backing.ReadErrors == 0 || st.IO.FailedReads < uint64(failed) {
		t.Fatalf("read fault: %d failed, read errors %d, failed reads %d", failed, st.Backing.ReadErrors, st.IO.FailedReads)
	}
	os.Remove(filepath.Join(faults, "backing-read"))
	checkPages(t, d, "f", first)
}

// A loop device over a small tmpfs that fills up fails mid-write: the
// error is counted, the pages stay in RAM, and PUTs are refused only then.
func TestBackingDeviceFillsUp(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("loop devices and mounts need root")
	}
	if _, err := exec.LookPath("losetup"); err != nil {
		t.Skip("no losetup (util-linux)")
	}
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=6m"); err != nil {
		t.Skipf("cannot mount a tmpfs: %v", err)
	}
	t.Cleanup(func() { syscall.Unmount(dir, syscall.MNT_DETACH) })
	img := filepath.Join(dir, "img")
	os.WriteFile(img, nil, 0o600)
	os.Truncate(img, 64<<20) // sparse: only 6 MiB will ever fit
	out, err := exec.Command("losetup", "--find", "--show", img).CombinedOutput()
	if err != nil {
		t.Skipf("no loop device: %v %s", err, out)
	}
	dev := strings.TrimSpace(string(out))
	t.Cleanup(func() { exec.Command("losetup", "-d", dev).Run() })

	d := start(t, "--mem-limit", "2M", "--backing-file", dev)
	c := d.client()
	pages := corpus.Pages(corpus.Random, 4096, 4096, 51) // 16 MiB that do not compress
	var stored []uint64
	var want []byte
	for lo := 0; lo < 4096; lo += 256 {
		codes, err := c.Put(ctx(t), "l", keys(uint64(lo), 256), pages[lo*4096:(lo+256)*4096])
		if err != nil {
			t.Fatal(err)
		}
		for i, code := range codes {
			if code == ipc.OK {
				stored = append(stored, uint64(lo+i))
				want = append(want, pages[(lo+i)*4096:(lo+i+1)*4096]...)
			} else if code != ipc.CodeNoSpace {
				t.Fatalf("put: %v", code)
			}
		}
	}
	st := statsOf(t, d)
	if len(stored) == 4096 || st.Backing.Failures+st.Backing.FullRounds == 0 {
		t.Fatalf("%d of 4096 pages stored with 8 MiB of room; backing %+v", len(stored), st.Backing)
	}
	got, codes, err := c.Get(ctx(t), "l", stored)
	if err != nil {
		t.Fatal(err)
	}
	if err := ipc.PageError(stored, codes); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("pages stored before the device filled: %v, equal %v; backing %+v", err, bytes.Equal(got, want), statsOf(t, d).Backing)
	}
	t.Log(fmt.Sprintf("%d of 4096 pages stored; %s", len(stored), st.Backing.LastError))
}

// crashPage is key's page at version v: its key and version, 1 KiB from
// a generator seeded by both, zeros after (about 4:1 under LZ4, so that
// 4096 of them overflow a 4 MiB limit onto the file).
func crashPage(dst []byte, key, v uint64) {
	clear(dst)
	binary.LittleEndian.PutUint64(dst, key)
	binary.LittleEndian.PutUint64(dst[8:], v)
	x := key*0x9E3779B97F4A7C15 ^ v*0xBF58476D1CE4E5B9 | 1
	for i := 16; i < 1024; i += 8 {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		binary.LittleEndian.PutUint64(dst[i:], x)
	}
}

// A daemon killed (-9) at random moments while clients write and delete,
// with persist and a checkpoint a second: every page comes back as last
// written (or as a write under way at the kill left it), or not at all,
// and then the start reports it lost; never an older version.
// S4D_SEED picks the moments; the rounds are bounded in time.
func TestPersistCrashAtRandom(t *testing.T) {
	seed := time.Now().UnixNano()
	if v, err := strconv.ParseInt(os.Getenv("S4D_SEED"), 10, 64); err == nil {
		seed = v
	}
	t.Logf("S4D_SEED=%d", seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 0))
	path := backingFile(t, 64<<20)
	args := []string{"--mem-limit", "4M", "--backing-file", path, "--persist", "true", "--checkpoint-interval", "1s"}
	const n, writers, batch = 4096, 2, 64
	const gone = ^uint64(0)   // version of a deleted or lost page
	last := make([]uint64, n) // each key's version as last answered; 0: never written
	for k := range last {
		last[k] = gone
	}
	d := start(t, args...)
	for round := range 4 {
		// Each writer owns the keys k%writers == g: a key has one write
		// under way at most, recorded in flight until answered.
		var mu sync.Mutex
		var answered atomic.Int64
		flight := map[uint64]uint64{}
		// The writers stop at one random moment and the kill comes at
		// another: a kill while they write finds the pool changed since
		// the last checkpoint; one after a checkpoint of a pool at rest
		// finds every page there, or lost in RAM.
		stop := make(chan struct{})
		writeFor := time.Duration(200+rng.IntN(1800)) * time.Millisecond
		killAt := time.Duration(300+rng.IntN(3200)) * time.Millisecond
		t0 := time.Now()
		var wg sync.WaitGroup
		for g := range writers {
			wrng := rand.New(rand.NewPCG(rng.Uint64(), uint64(g)))
			wg.Add(1)
			go func() {
				defer wg.Done()
				c := &client.Client{Socket: d.socket}
				defer c.Close()
				page := make([]byte, batch*4096)
				ks := make([]uint64, batch)
				for v := uint64(round)<<32 | 1; time.Since(t0) < writeFor; v++ {
					select {
					case <-stop:
						return
					default:
					}
					del := wrng.IntN(8) == 0
					base := wrng.IntN(n / writers)
					mu.Lock()
					for i := range ks { // distinct keys: 37 is prime to n/writers
						ks[i] = uint64((base+i*37)%(n/writers)*writers + g)
						if del {
							flight[ks[i]] = gone
						} else {
							flight[ks[i]] = v
							crashPage(page[i*4096:(i+1)*4096], ks[i], v)
						}
					}
					mu.Unlock()
					var codes []ipc.Code
					var err error
					if del {
						codes, err = c.Del(context.Background(), "p", ks)
					} else {
						codes, err = c.Put(context.Background(), "p", ks, page)
					}
					if del && errors.Is(err, ipc.ErrNotFound) { // no pool yet
						codes, err = make([]ipc.Code, batch), nil
					}
					if err != nil {
						select {
						case <-stop:
						case <-time.After(time.Second): // the kill comes first, then stop
							t.Errorf("writer %d: %v", g, err)
						}
						return // the daemon died: these stay in flight
					}
					answered.Add(1)
					mu.Lock()
					for i, k := range ks {
						switch {
						case codes[i] == ipc.OK && !del:
							last[k] = v
						case del && (codes[i] == ipc.OK || codes[i] == ipc.CodeNotFound):
							last[k] = gone
						default:
							t.Errorf("key %d: %v", k, codes[i])
						}
						delete(flight, k)
					}
					mu.Unlock()
				}
			}()
		}
		time.Sleep(killAt)
		d.cmd.Process.Kill()
		<-d.done
		d.done <- nil
		close(stop)
		wg.Wait()

		d = start(t, args...)
		st := statsOf(t, d).Backing
		got, codes, err := d.client().Get(ctx(t), "p", keys(0, n))
		if err != nil && !strings.Contains(err.Error(), "no pool") {
			t.Fatal(err)
		}
		want := make([]byte, 4096)
		missing, back := 0, 0
		for k := range uint64(n) {
			if err != nil || codes[k] == ipc.CodeNotFound {
				if fv, inFlight := flight[k]; last[k] != gone && !(inFlight && fv == gone) {
					missing++ // answered before the kill, lost
				}
				last[k] = gone
				continue
			}
			back++
			if codes[k] != ipc.OK {
				t.Fatalf("round %d key %d: %v", round, k, codes[k])
			}
			v := binary.LittleEndian.Uint64(got[k*4096+8:])
			fv, inFlight := flight[k]
			if v != last[k] && !(inFlight && v == fv) {
				t.Fatalf("round %d key %d: version %x came back; last answered %x, in flight %x (%v)", round, k, v, last[k], fv, inFlight)
			}
			if crashPage(want, k, v); !bytes.Equal(got[k*4096:(k+1)*4096], want) {
				t.Fatalf("round %d key %d: the bytes of no version", round, k)
			}
			last[k] = v
		}
		// A page answered before the kill and missing now is reported:
		// counted, or of a pool reported changed (whose later pages are
		// lost uncounted).
		if changed := len(st.ChangedPoolsAtStart) > 0; !changed && uint64(missing) > st.LostAtStart {
			t.Fatalf("round %d: %d pages missing, %d reported lost", round, missing, st.LostAtStart)
		}
		t.Logf("round %d: %d batches answered; %d pages back, %d missing; reported %d lost, pools changed %v",
			round, answered.Load(), back, missing, st.LostAtStart, st.ChangedPoolsAtStart)
		if answered.Load() == 0 {
			t.Fatalf("round %d: no write answered", round)
		}
	}
}
