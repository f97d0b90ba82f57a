package tests

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/s4d-project/s4d/backends/backendtest"
	"github.com/s4d-project/s4d/backends/corpus"
	"github.com/s4d-project/s4d/client"
	"github.com/s4d-project/s4d/ipc"
	"github.com/s4d-project/s4d/pagefmt"
)

// Several clients at once, each with its own pool and corpus, pipelining
// on shared connections; every page checked byte for byte and the stats
// checked against what was stored.
func TestConcurrentClients(t *testing.T) {
	d := start(t)
	const ps, perClient, batch = 4096, 512, 64
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	var want [8][]byte
	for g := range want {
		want[g] = corpus.Pages(corpus.Kinds[g%len(corpus.Kinds)], perClient, ps, uint64(g))
	}
	for g := range want {
		c := d.client()
		pool := fmt.Sprintf("client-%d", g)
		// Two goroutines per client: requests pipeline on one connection.
		for half := range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for b := half; b < perClient/batch; b += 2 {
					ks := keys(uint64(b*batch), batch)
					codes, err := c.Put(ctx(t), pool, ks, want[g][b*batch*ps:(b+1)*batch*ps])
					if err == nil {
						err = ipc.PageError(ks, codes)
					}
					if err != nil {
						errs <- fmt.Errorf("%s put: %w", pool, err)
						return
					}
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	var zero, same uint64
	for g := range want {
		c := d.client()
		pool := fmt.Sprintf("client-%d", g)
		pages, codes, err := c.Get(ctx(t), pool, keys(0, perClient))
		if err != nil {
			t.Fatal(err)
		}
		allOK(t, "get", keys(0, perClient), codes)
		if !bytes.Equal(pages, want[g]) {
			t.Fatalf("%s: pages differ", pool)
		}
		for i := range perClient {
			switch cl, _ := pagefmt.Classify(want[g][i*ps : (i+1)*ps]); cl {
			case pagefmt.ClassZero:
				zero++
			case pagefmt.ClassSame:
				same++
			}
		}
	}
	st, err := d.client().Stats(ctx(t), "")
	if err != nil {
		t.Fatal(err)
	}
	m := st.Mem
	if m.Pages != 8*perClient || m.OrigDataSize != 8*perClient*ps || m.ZeroPages != zero || m.SamePages != same {
		t.Fatalf("stats %+v; want %d pages, %d zero, %d same", m, 8*perClient, zero, same)
	}
	if m.ComprDataSize == 0 || m.ComprDataSize >= m.OrigDataSize || m.MemUsedTotal < m.ComprDataSize || m.HugePages == 0 {
		t.Fatalf("implausible sizes %+v", m)
	}
	if len(st.Pools) != 8 || st.Backends[len(st.Backends)-1].Name != "cpu" {
		t.Fatalf("pools %d, backends %+v", len(st.Pools), st.Backends)
	}
	var stored uint64
	for _, p := range st.Pools {
		stored += p.StoredBytes
	}
	if stored != m.ComprDataSize {
		t.Fatalf("pool bytes %d != compr_data_size %d", stored, m.ComprDataSize)
	}
}

// INSPECT's stored bytes are standard formats: liblz4 and the zstd
// command decode them to the original pages.
func TestStoredFormats(t *testing.T) {
	for _, codec := range []string{"lz4", "zstd"} {
		t.Run(codec, func(t *testing.T) {
			d := start(t, "--codec", codec)
			c := d.client()
			pages := corpus.Pages(corpus.Mixed, 200, 4096, 11)
			ks := keys(100, 200)
			codes, err := c.Put(ctx(t), "fmt", ks, pages)
			if err != nil {
				t.Fatal(err)
			}
			allOK(t, "put", ks, codes)
			infos, err := c.Inspect(ctx(t), "fmt", ks, true)
			if err != nil {
				t.Fatal(err)
			}
			var blocks [][]byte
			var want []byte
			classes := map[string]int{}
			for i, in := range infos {
				classes[in.Class]++
				if in.Backend != "cpu" || in.Size != uint32(len(in.Data)) {
					t.Fatalf("key %d: %+v", in.Key, in)
				}
				if in.Class == codec {
					blocks = append(blocks, in.Data)
					want = append(want, pages[i*4096:(i+1)*4096]...)
				}
			}
			if len(blocks) == 0 || classes["zero"] == 0 || classes["raw"] == 0 {
				t.Fatalf("classes %v", classes)
			}
			var got []byte
			if codec == "lz4" {
				got = backendtest.ExternalLZ4(t, blocks, 4096)
			} else {
				got = backendtest.ExternalZstd(t, blocks)
			}
			if !bytes.Equal(got, want) {
				t.Fatal("reference decoder disagrees")
			}
		})
	}
}

func TestCtlTour(t *testing.T) {
	d := start(t)
	dir := t.TempDir()
	file := filepath.Join(dir, "in.bin")
	pages := corpus.Pages(corpus.Mixed, 40, 4096, 5)
	os.WriteFile(file, pages, 0o644)
	if out := d.mustCtl("put", "--pool", "tour", "--file", file, "--first-key", "1000"); !strings.Contains(out, "stored 40 pages") {
		t.Fatalf("put said %q", out)
	}
	out := filepath.Join(dir, "out.bin")
	d.mustCtl("get", "--pool", "tour", "--keys", "1000-1039", "--out", out)
	if got, _ := os.ReadFile(out); !bytes.Equal(got, pages) {
		t.Fatal("get returned different pages")
	}
	raw := filepath.Join(dir, "raw")
	insp := d.mustCtl("inspect", "--pool", "tour", "--keys", "1000-1039", "--raw-out", raw)
	if lines := strings.Count(insp, "\n"); lines != 41 {
		t.Fatalf("inspect printed %d lines:\n%s", lines, insp)
	}
	files, _ := os.ReadDir(raw)
	if len(files) != 40 {
		t.Fatalf("--raw-out wrote %d files", len(files))
	}
	stats := d.mustCtl("stats")
	for _, want := range []string{"CODEC", "lz4", "ZERO-PAGES", "cpu", "ok", "tour"} {
		if !strings.Contains(stats, want) {
			t.Fatalf("stats lacks %q:\n%s", want, stats)
		}
	}
	var st ipc.Stats
	if err := json.Unmarshal([]byte(d.mustCtl("stats", "--json")), &st); err != nil || st.Mem.Pages != 40 {
		t.Fatalf("stats --json: %v %+v", err, st.Mem)
	}
	if p := d.mustCtl("pools"); !strings.Contains(p, "tour") {
		t.Fatalf("pools: %s", p)
	}
	d.mustCtl("del", "--pool", "tour", "--keys", "1000-1019")
	if o, err := d.ctl("get", "--pool", "tour", "--keys", "1000-1039", "--out", out); err == nil || !strings.Contains(o, "not found") || strings.Count(strings.TrimSpace(o), "\n") != 0 {
		t.Fatalf("get of deleted keys: %v %q", err, o)
	}
	d.mustCtl("compact")
	// No daemon: one line saying how to start one.
	o, err := exec.Command(s4dBin, "ctl", "--socket", filepath.Join(dir, "none.sock"), "stats").CombinedOutput()
	if err == nil || !strings.Contains(string(o), "systemctl start s4d") || strings.Count(strings.TrimSpace(string(o)), "\n") != 0 {
		t.Fatalf("no daemon: %v %q", err, o)
	}
	// A file that is not whole pages.
	os.WriteFile(file, make([]byte, 5000), 0o644)
	if o, err := d.ctl("put", "--pool", "tour", "--file", file); err == nil || !strings.Contains(o, "not a whole number") {
		t.Fatalf("partial page file: %v %q", err, o)
	}
}

func TestMemLimit(t *testing.T) {
	d := start(t, "--mem-limit", "1M")
	c := d.client()
	pages := corpus.Pages(corpus.Random, 1024, 4096, 3) // 4 MiB, incompressible
	ks := keys(0, 1024)
	codes, err := c.Put(ctx(t), "full", ks, pages)
	if err != nil {
		t.Fatal(err)
	}
	var ok, nospace int
	for _, code := range codes {
		switch code {
		case ipc.OK:
			ok++
		case ipc.CodeNoSpace:
			nospace++
		default:
			t.Fatalf("code %v", code)
		}
	}
	if ok == 0 || nospace == 0 || ok+nospace != 1024 {
		t.Fatalf("%d stored, %d refused", ok, nospace)
	}
	got, gcodes, err := c.Get(ctx(t), "full", ks)
	if err != nil {
		t.Fatal(err)
	}
	for i := range ks {
		if (gcodes[i] == ipc.OK) != (codes[i] == ipc.OK) {
			t.Fatalf("key %d: put %v, get %v", i, codes[i], gcodes[i])
		}
		if gcodes[i] == ipc.OK && !bytes.Equal(got[i*4096:(i+1)*4096], pages[i*4096:(i+1)*4096]) {
			t.Fatalf("key %d changed", i)
		}
	}
	st, _ := c.Stats(ctx(t), "")
	if st.Mem.MemLimit != 1<<20 || st.Mem.MemUsedMax > 1<<20 || st.IO.NoSpace != uint64(nospace) {
		t.Fatalf("stats %+v %+v", st.Mem, st.IO)
	}
}

func TestSocketLifecycle(t *testing.T) {
	d := start(t)
	// A second daemon on a live socket refuses to start.
	second := exec.Command(s4dBin, "daemon", "--socket", d.socket)
	if out, err := second.CombinedOutput(); err == nil || !strings.Contains(string(out), "already serving") {
		t.Fatalf("second daemon: %v %s", err, out)
	}
	// SIGTERM: requests already sent are answered, then exit 0.
	c := d.client()
	pages := corpus.Pages(corpus.Text, 2048, 4096, 1)
	res := make(chan error, 1)
	go func() {
		codes, err := c.Put(ctx(t), "p", keys(0, 2048), pages)
		if err == nil {
			err = ipc.PageError(keys(0, 2048), codes)
		}
		res <- err
	}()
	time.Sleep(50 * time.Millisecond)
	d.cmd.Process.Signal(syscall.SIGTERM)
	if err := <-res; err != nil && !errors.Is(err, client.ErrConnLost) {
		t.Fatalf("in-flight put: %v", err)
	}
	select {
	case err := <-d.done:
		d.done <- err
		if err != nil {
			t.Fatalf("exit after SIGTERM: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("daemon did not exit after SIGTERM")
	}
	// The socket file is stale now (or gone): a new daemon takes it over.
	if _, err := os.Stat(d.socket); err == nil {
		t.Log("socket file left behind; the next daemon must replace it")
	}
	startOn(t, d.socket)
	makeStale(t, d.socket+".stale")
	startOn(t, d.socket+".stale")
}

// makeStale leaves a socket file with no listener behind it.
func makeStale(t *testing.T, path string) {
	fd, err := syscall.Socket(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Bind(fd, &syscall.SockaddrUnix{Name: path}); err != nil {
		t.Fatal(err)
	}
	syscall.Close(fd)
	if _, err := os.Stat(path); err != nil {
		t.Fatal(err)
	}
}

// Pools belong to the user that created them: two ordinary users, each
// running the real ctl, cannot read, overwrite, delete, inspect or list
// each other's pools; root sees everything.
func TestTwoUsers(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root to run clients as other users")
	}
	d := start(t, "--socket-mode", "0666")
	dir, err := os.MkdirTemp("", "s4d-users-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	os.Chmod(dir, 0o777)
	alice, bob := uint32(4242), uint32(4343)
	as := func(uid uint32, args ...string) (string, error) {
		cmd := exec.Command(s4dBin, append([]string{"ctl", "--socket", d.socket}, args...)...)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: uid}}
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	mine := filepath.Join(dir, "alice.bin")
	theirs := filepath.Join(dir, "bob.bin")
	os.WriteFile(mine, corpus.Pages(corpus.Text, 4, 4096, 1), 0o644)
	os.WriteFile(theirs, corpus.Pages(corpus.Pointers, 4, 4096, 2), 0o644)
	if out, err := as(alice, "put", "--pool", "alice", "--file", mine); err != nil {
		t.Fatalf("alice put: %v %s", err, out)
	}
	if out, err := as(bob, "put", "--pool", "bob", "--file", theirs); err != nil {
		t.Fatalf("bob put: %v %s", err, out)
	}
	for _, args := range [][]string{
		{"get", "--pool", "alice", "--keys", "0-3", "--out", "stolen.bin"},
		{"put", "--pool", "alice", "--file", theirs},
		{"del", "--pool", "alice", "--keys", "0"},
		{"inspect", "--pool", "alice", "--keys", "0", "--raw-out", "raw"},
		{"stats", "--pool", "alice"},
	} {
		if out, err := as(bob, args...); err == nil || !strings.Contains(out, "permission denied") {
			t.Fatalf("bob %v: %v %q", args, err, out)
		}
	}
	for _, args := range [][]string{{"pools"}, {"stats"}, {"stats", "--json"}} {
		out, err := as(bob, args...)
		if err != nil || strings.Contains(out, "alice") || !strings.Contains(out, "bob") {
			t.Fatalf("bob %v shows another user's pools or not his own: %v %q", args, err, out)
		}
	}
	// Alice's pages are untouched; root sees both pools.
	out := filepath.Join(dir, "check.bin")
	if o, err := as(alice, "get", "--pool", "alice", "--keys", "0-3", "--out", out); err != nil {
		t.Fatalf("alice get: %v %s", err, o)
	}
	if a, b := mustRead(t, out), mustRead(t, mine); !bytes.Equal(a, b) {
		t.Fatal("alice's pages changed")
	}
	pools, err := d.client().Pools(ctx(t))
	if err != nil || len(pools) != 2 || pools[0].UID != alice || pools[1].UID != bob {
		t.Fatalf("root's view: %v %+v", err, pools)
	}
}

func mustRead(t *testing.T, path string) []byte {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
