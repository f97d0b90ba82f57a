package backing

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// testFile makes a zeroed file of size bytes in a directory whose
// filesystem takes O_DIRECT, or skips saying why there is none.
func testFile(t *testing.T, size int64) string {
	t.Helper()
	dir := t.TempDir()
	p := filepath.Join(dir, "backing")
	if err := os.WriteFile(p, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(p, size); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(p, os.O_RDWR|syscall.O_DIRECT, 0)
	if err != nil {
		t.Skipf("the test directory %s does not take O_DIRECT (%v): set TMPDIR to a disk filesystem", dir, err)
	}
	f.Close()
	return p
}

func put(t *testing.T, bf *File, objs [][]byte) []uint64 {
	t.Helper()
	sizes := make([]int, len(objs))
	for i, o := range objs {
		sizes[i] = len(o)
	}
	b := bf.Place(sizes)
	if len(b.Offs) != len(objs) {
		t.Fatalf("placed %d of %d", len(b.Offs), len(objs))
	}
	for i, o := range objs {
		copy(b.Slot(i), o)
	}
	if err := bf.Write(b); err != nil {
		t.Fatal(err)
	}
	return b.Offs
}

func randObjs(r *rand.Rand, n int) [][]byte {
	objs := make([][]byte, n)
	for i := range objs {
		o := make([]byte, 1+r.IntN(4100))
		for j := range o {
			o[j] = byte(r.Uint32())
		}
		objs[i] = o
	}
	return objs
}

func TestWriteReadPacked(t *testing.T) {
	p := testFile(t, 8<<20)
	bf, idx, err := Open(p, 4096, false)
	if err != nil {
		t.Fatal(err)
	}
	defer bf.Close()
	if idx != nil {
		t.Fatalf("fresh file without persist returned an index")
	}
	r := rand.New(rand.NewPCG(1, 2))
	objs := randObjs(r, 500)
	offs := put(t, bf, objs)
	st := bf.Stats()
	var total int
	for _, o := range objs {
		total += len(o)
	}
	// Packed: the writes take about the objects' bytes, not a block each.
	if st.BytesWritten > uint64(total)+uint64(len(objs))*16+4*BlockSize || st.Writes > 4 {
		t.Fatalf("wrote %d bytes in %d I/Os for %d bytes of objects", st.BytesWritten, st.Writes, total)
	}
	rs := make([]Read, len(objs))
	for i := range rs {
		rs[i] = Read{Off: offs[i], Len: len(objs[i])}
	}
	bf.ReadBatch(rs)
	for i := range rs {
		if rs[i].Err != nil || !bytes.Equal(rs[i].Data, objs[i]) {
			t.Fatalf("object %d: %v", i, rs[i].Err)
		}
	}
	if st := bf.Stats(); st.Reads >= uint64(len(objs))/10 {
		t.Fatalf("%d read I/Os for %d neighbouring objects", st.Reads, len(objs))
	}
	// Freed space is used again: fill, free, fill.
	free0 := bf.Stats().FreeBytes
	for i, off := range offs {
		bf.Free(off, len(objs[i]))
	}
	if st := bf.Stats(); st.Pages != 0 || st.FreeBytes <= free0 {
		t.Fatalf("after freeing all: %+v", st)
	}
	var n int
	for {
		b := bf.Place([]int{3000, 3000, 3000, 3000})
		n += len(b.Offs)
		if len(b.Offs) < 4 {
			break
		}
	}
	if want := int((8<<20)/BlockSize-headerBlocks) * BlockSize / 3008; n < want*9/10 {
		t.Fatalf("fitted %d objects of 3000 bytes, want about %d", n, want)
	}
}

func TestPersistRoundTrip(t *testing.T) {
	p := testFile(t, 4<<20)
	bf, idx, err := Open(p, 4096, true)
	if err != nil {
		t.Fatal(err)
	}
	if idx == nil || idx.Pages() != 0 {
		t.Fatalf("fresh file: index %v", idx)
	}
	objs := randObjs(rand.New(rand.NewPCG(3, 4)), 50)
	offs := put(t, bf, objs)
	x := &Index{Backends: []string{"cpu"}, Pools: []Pool{{Name: "a", UID: 7, Keys: []uint64{1, 2}, Words: []uint64{offs[0], offs[1]}}}}
	bf.BeginCheckpoint()
	if err := bf.Checkpoint(x); err != nil {
		t.Fatal(err)
	}
	// A block freed after the checkpoint is not reused before the next.
	bf.Free(offs[0], len(objs[0]))
	before := bf.Stats().FreeBytes
	bf.Close()

	bf, idx, err = Open(p, 4096, true)
	if err != nil {
		t.Fatal(err)
	}
	if len(idx.Pools) != 1 || idx.Pools[0].UID != 7 || idx.Pools[0].Words[1] != offs[1] || idx.Backends[0] != "cpu" {
		t.Fatalf("index back: %+v", idx)
	}
	bf.Close()
	_ = before

	// Damage: a flipped header byte in both copies is refused, the file untouched.
	raw, _ := os.ReadFile(p)
	for _, at := range []int{40, BlockSize + 40} {
		raw[at] ^= 1
	}
	os.WriteFile(p, raw, 0o600)
	if _, _, err := Open(p, 4096, true); err == nil || !strings.Contains(err.Error(), "checksum") {
		t.Fatalf("damaged header: %v", err)
	}
	if after, _ := os.ReadFile(p); !bytes.Equal(after, raw) {
		t.Fatal("a refused file was changed")
	}
	// Only one copy damaged (a torn header write): the other is used.
	raw[BlockSize+40] ^= 1
	os.WriteFile(p, raw, 0o600)
	if bf, _, err := Open(p, 4096, true); err != nil {
		t.Fatalf("one good header copy: %v", err)
	} else {
		bf.Close()
	}
}

func TestRefused(t *testing.T) {
	p := testFile(t, 1<<20)
	// Not ours.
	os.WriteFile(p, bytes.Repeat([]byte("data"), 1<<18), 0o600)
	_, _, err := Open(p, 4096, false)
	if !errors.Is(err, errNotOurs) {
		t.Fatalf("foreign file: %v", err)
	}
	// Another version.
	h := header{Version: FormatVersion + 1, PageSize: 4096, Blocks: 256, UnitShift: 4}
	raw := make([]byte, 1<<20)
	copy(raw, h.encode())
	os.WriteFile(p, raw, 0o600)
	if _, _, err := Open(p, 4096, true); !errors.Is(err, errVersion) {
		t.Fatalf("other version: %v", err)
	}
	// Too small.
	os.Truncate(p, 16*BlockSize)
	if _, _, err := Open(p, 4096, false); !errors.Is(err, errTooSmall) {
		t.Fatalf("small file: %v", err)
	}
	// Missing.
	if _, _, err := Open(p+"x", 4096, false); err == nil || !strings.Contains(err.Error(), "fallocate") {
		t.Fatalf("missing file: %v", err)
	}
}

// A filesystem without O_DIRECT is named in the error. tmpfs takes
// O_DIRECT on kernels from 6.6 on; ramfs does not.
func TestNoDirectIO(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting a ramfs (a filesystem without O_DIRECT) needs root")
	}
	dir := t.TempDir()
	if err := syscall.Mount("none", dir, "ramfs", 0, ""); err != nil {
		t.Skipf("cannot mount a ramfs: %v", err)
	}
	defer syscall.Unmount(dir, 0)
	p := filepath.Join(dir, "backing")
	os.WriteFile(p, make([]byte, 1<<20), 0o600)
	if _, _, err := Open(p, 4096, false); err == nil || !strings.Contains(err.Error(), "O_DIRECT") {
		t.Fatalf("ramfs: %v", err)
	}
}

func TestReadOnly(t *testing.T) {
	if os.Geteuid() == 0 {
		// root opens a 0400 file for writing: make the filesystem refuse instead.
		t.Skip("root ignores file permissions; the read-only filesystem case is tested end to end")
	}
	p := testFile(t, 1<<20)
	os.Chmod(p, 0o400)
	if _, _, err := Open(p, 4096, false); err == nil || !strings.Contains(err.Error(), "read-only") {
		t.Fatalf("read-only: %v", err)
	}
}

func FuzzDecodeIndex(f *testing.F) {
	x := &Index{Backends: []string{"cpu", "cuda"}, Pools: []Pool{{Name: "p", UID: 1, Keys: []uint64{1, 5}, Words: []uint64{9, 10}}, {Name: "q"}}}
	f.Add(x.Encode(nil))
	f.Add((&Index{}).Encode(nil))
	h := header{Version: FormatVersion, PageSize: 4096, Blocks: 100, UnitShift: 4, Seq: 3, IndexOff: 8192, IndexLen: 50}
	f.Add(h.encode())
	f.Fuzz(func(t *testing.T, b []byte) {
		if x, err := DecodeIndex(b); err == nil {
			// What decodes encodes back to the same bytes.
			if !bytes.Equal(x.Encode(nil), b) {
				t.Fatalf("round trip differs")
			}
		}
		if h, err := decodeHeader(b); err == nil {
			if !bytes.Equal(h.encode()[:headerLen], b[:headerLen]) {
				t.Fatalf("header round trip differs")
			}
		}
	})
}

// Space freed while a reader holds the file is not reused until it lets
// go: what it reads is what was written there.
func TestHoldDefersReuse(t *testing.T) {
	p := testFile(t, 1<<20)
	bf, _, err := Open(p, 4096, false)
	if err != nil {
		t.Fatal(err)
	}
	defer bf.Close()
	r := rand.New(rand.NewPCG(3, 4))
	objs := randObjs(r, 40)
	offs := put(t, bf, objs)
	bf.Hold()
	for i, off := range offs {
		bf.Free(off, len(objs[i]))
	}
	// Fill the file while held: none of it lands on the freed objects.
	for {
		b := bf.Place([]int{4000})
		if len(b.Offs) == 0 {
			break
		}
		for i, off := range offs {
			if b.Offs[0] < off+uint64(len(objs[i])) && off < b.Offs[0]+4000 {
				t.Fatalf("space freed under a hold was reused at %d", b.Offs[0])
			}
		}
	}
	rs := make([]Read, len(objs))
	for i := range rs {
		rs[i] = Read{Off: offs[i], Len: len(objs[i])}
	}
	bf.ReadBatch(rs)
	for i := range rs {
		if rs[i].Err != nil || !bytes.Equal(rs[i].Data, objs[i]) {
			t.Fatalf("object %d changed under the hold: %v", i, rs[i].Err)
		}
	}
	bf.Unhold()
	if b := bf.Place([]int{4000}); len(b.Offs) != 1 {
		t.Fatal("the space freed under the hold did not come back after it")
	}
}
