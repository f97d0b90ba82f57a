package tests

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"github.com/s4d-project/s4d/backends/corpus"
	"github.com/s4d-project/s4d/client"
	"github.com/s4d-project/s4d/ipc"
)

var (
	faultOnce sync.Once
	faultBin  string
	faultErr  error
)

// faultBinary builds s4d with fault injection compiled in (tag s4dfault).
func faultBinary(t *testing.T) string {
	faultOnce.Do(func() {
		faultBin = filepath.Join(filepath.Dir(s4dBin), "s4d-fault")
		out, err := exec.Command("go", "build", "-tags", "s4dfault", "-o", faultBin, "../cmd/s4d").CombinedOutput()
		if err != nil {
			faultErr = errors.New(string(out))
		}
	})
	if faultErr != nil {
		t.Fatalf("building the fault-injection binary: %v", faultErr)
	}
	return faultBin
}

// A backend that fails mid-batch loses nothing: the batch is stored whole
// by a fallback or refused whole, and counted; stored pages stay readable.
func TestBackendFault(t *testing.T) {
	bin := faultBinary(t)
	faults := t.TempDir()
	t.Setenv("S4D_FAULT_DIR", faults)
	d := startBin(t, bin)
	c := d.client()
	before := corpus.Pages(corpus.Mixed, 32, 4096, 1)
	allOKPut(t, c, "f", keys(0, 32), before)

	// The only backend (cpu) now fails every batch after writing its output.
	os.WriteFile(filepath.Join(faults, "backend-cpu"), nil, 0o644)
	pages := corpus.Pages(corpus.Text, 64, 4096, 2)
	if _, err := c.Put(ctx(t), "f", keys(100, 64), pages); ipc.CodeOf(err) != ipc.CodeFailed {
		t.Fatalf("put during the fault: %v", err)
	}
	if _, err := c.Put(ctx(t), "f", keys(0, 32), pages[:32*4096]); ipc.CodeOf(err) != ipc.CodeFailed {
		t.Fatalf("overwrite during the fault: %v", err)
	}
	if _, _, err := c.Get(ctx(t), "f", keys(0, 32)); ipc.CodeOf(err) != ipc.CodeFailed {
		t.Fatalf("get during the fault: %v", err)
	}
	os.Remove(filepath.Join(faults, "backend-cpu"))

	// Nothing half-stored, nothing lost.
	got, codes, err := c.Get(ctx(t), "f", keys(0, 32))
	if err != nil || ipc.PageError(keys(0, 32), codes) != nil || string(got) != string(before) {
		t.Fatalf("pages stored before the fault changed: %v %v", err, codes)
	}
	if _, codes, err := c.Get(ctx(t), "f", keys(100, 64)); err != nil || codes[0] != ipc.CodeNotFound || codes[63] != ipc.CodeNotFound {
		t.Fatalf("a failed batch left pages behind: %v %v", err, codes)
	}
	st, err := c.Stats(ctx(t), "")
	if err != nil {
		t.Fatal(err)
	}
	var errs uint64
	for _, b := range st.Backends {
		for _, ct := range b.Counters {
			errs += ct.Errors
		}
	}
	if st.IO.FailedWrites != 96 || st.IO.FailedReads != 32 || errs != 3 || st.Mem.Pages != 32 {
		t.Fatalf("fault not counted: io %+v, backend errors %d, pages %d", st.IO, errs, st.Mem.Pages)
	}
	allOKPut(t, c, "f", keys(100, 64), pages)
}

func allOKPut(t *testing.T, c *client.Client, pool string, ks []uint64, pages []byte) {
	t.Helper()
	codes, err := c.Put(ctx(t), pool, ks, pages)
	if err != nil {
		t.Fatal(err)
	}
	allOK(t, "put", ks, codes)
}

// A stored page damaged in RAM (a bit flipped after its checksum was
// taken) is never returned as data, whichever path reads it: a small GET
// and GET_FD (checked by the engine as it decodes), a streamed GET
// (checked as the store copies it), INSPECT. The pages around it come back
// whole, and each read is counted.
func TestStoredCorruption(t *testing.T) {
	bin := faultBinary(t)
	faults := t.TempDir()
	t.Setenv("S4D_FAULT_DIR", faults)
	d := startBin(t, bin)
	c := d.client()
	const n, bad = 512, 77
	os.WriteFile(filepath.Join(faults, "corrupt-77"), nil, 0o644)
	pages := corpus.Pages(corpus.Text, n, 4096, 5)
	allOKPut(t, c, "c", keys(0, n), pages)
	os.Remove(filepath.Join(faults, "corrupt-77"))

	check := func(what string, got []byte, codes []ipc.Code, lo int) {
		t.Helper()
		for i, code := range codes {
			key := lo + i
			want := ipc.OK
			if key == bad {
				want = ipc.CodeCorrupt
			}
			if code != want {
				t.Fatalf("%s: key %d: %v, want %v", what, key, code, want)
			}
			if got != nil && key != bad && string(got[i*4096:(i+1)*4096]) != string(pages[key*4096:(key+1)*4096]) {
				t.Fatalf("%s: key %d came back different", what, key)
			}
		}
	}
	// Up to 1 MiB: decoded whole (engine-checked).
	got, codes, err := c.Get(ctx(t), "c", keys(64, 128))
	if err != nil {
		t.Fatal(err)
	}
	check("GET", got, codes, 64)
	// Over 1 MiB: streamed (store-checked).
	got, codes, err = c.Get(ctx(t), "c", keys(0, n))
	if err != nil {
		t.Fatal(err)
	}
	check("streamed GET", got, codes, 0)
	// Into a memfd: the damaged page's place keeps what it held.
	buf, err := client.NewPageBuffer(n * 4096)
	if err != nil {
		t.Fatal(err)
	}
	defer buf.Close()
	for i := range buf.Bytes() {
		buf.Bytes()[i] = 0xEE
	}
	codes, err = c.GetBuffer(ctx(t), "c", keys(0, n), buf, 0, 4096)
	if err != nil {
		t.Fatal(err)
	}
	check("GET_FD", buf.Bytes(), codes, 0)
	infos, err := c.Inspect(ctx(t), "c", keys(bad, 1), true)
	if err != nil || infos[0].Status != ipc.CodeCorrupt || len(infos[0].Data) != 0 {
		t.Fatalf("INSPECT of the damaged page: %+v %v", infos, err)
	}
	st, err := c.Stats(ctx(t), "")
	if err != nil {
		t.Fatal(err)
	}
	if st.IO.ChecksumErrors != 4 {
		t.Fatalf("checksum errors counted %d, want 4 (one a read)", st.IO.ChecksumErrors)
	}
}
