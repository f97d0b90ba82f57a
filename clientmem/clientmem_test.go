package clientmem

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/s4d-project/s4d/backends"
	"github.com/s4d-project/s4d/client"
)

// memfd makes a memfd of size bytes with the given seals added.
func memfd(t *testing.T, size int, seals int) *os.File {
	t.Helper()
	fd, err := unix.MemfdCreate("test", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		t.Fatal(err)
	}
	f := os.NewFile(uintptr(fd), "test")
	t.Cleanup(func() { f.Close() })
	if err := unix.Ftruncate(fd, int64(size)); err != nil {
		t.Fatal(err)
	}
	if seals != 0 {
		if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, seals); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

type fakePinner struct {
	pinned, unpinned int
	fail             bool
}

func (p *fakePinner) Pin(mem []byte) (func(), error) {
	if p.fail {
		return nil, errors.New("no device memory")
	}
	p.pinned++
	return func() { p.unpinned++ }, nil
}

func TestMapCacheReuse(t *testing.T) {
	const ps = 4096
	pin := &fakePinner{}
	failing := &fakePinner{fail: true}
	mc := &Cache{share: NewShare(func() []backends.Pinner { return []backends.Pinner{pin, failing} }, nil)}
	defer mc.Close()
	f := memfd(t, 64*ps, unix.F_SEAL_SHRINK)
	fd := int(f.Fd())

	a, temp, err := mc.Pages(fd, 0, 4*ps, ps, false)
	if err != nil || temp {
		t.Fatalf("first map: %v temp %v", err, temp)
	}
	// The same file again, by another descriptor and at another offset:
	// the mapping is reused, and what the client writes is seen.
	dup, err := unix.Dup(fd)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(dup)
	unix.Pwrite(fd, []byte("hello"), 8*ps)
	b, _, err := mc.Pages(dup, 8*ps, 4*ps, ps, false)
	if err != nil || string(b[:5]) != "hello" {
		t.Fatalf("second map: %v %q", err, b[:5])
	}
	if mc.share.mapped != 1 || pin.pinned != 1 {
		t.Fatalf("mapped %d times, pinned %d times; want 1 and 1", mc.share.mapped, pin.pinned)
	}
	_ = a
	// Writable on demand: mapped again once, then reused for both.
	w, _, err := mc.Pages(fd, 0, ps, ps, true)
	if err != nil {
		t.Fatal(err)
	}
	copy(w, "from the daemon")
	got := make([]byte, 15)
	unix.Pread(fd, got, 0)
	if string(got) != "from the daemon" {
		t.Fatalf("write through the mapping: %q", got)
	}
	if _, _, err := mc.Pages(fd, ps, ps, ps, false); err != nil {
		t.Fatal(err)
	}
	if mc.share.mapped != 2 || pin.unpinned != 1 || len(mc.maps) != 1 {
		t.Fatalf("after upgrade: mapped %d, unpinned %d, %d mappings", mc.share.mapped, pin.unpinned, len(mc.maps))
	}
	mc.Close()
	if pin.unpinned != pin.pinned || mc.bytes != 0 {
		t.Fatalf("close: pinned %d unpinned %d, %d bytes left", pin.pinned, pin.unpinned, mc.bytes)
	}
}

func TestMapCacheEviction(t *testing.T) {
	const ps = 4096
	mc := &Cache{}
	defer mc.Close()
	var files []*os.File
	for range mapCacheFiles + 1 {
		files = append(files, memfd(t, 4*ps, unix.F_SEAL_SHRINK))
	}
	for i, f := range files[:mapCacheFiles] {
		if _, _, err := mc.Pages(int(f.Fd()), 0, ps, ps, false); err != nil {
			t.Fatalf("file %d: %v", i, err)
		}
	}
	// Touch the first again: the second is now the least recently used.
	mc.Pages(int(files[0].Fd()), 0, ps, ps, false)
	mc.Pages(int(files[mapCacheFiles].Fd()), 0, ps, ps, false)
	if len(mc.maps) != mapCacheFiles {
		t.Fatalf("%d files mapped, limit %d", len(mc.maps), mapCacheFiles)
	}
	var st unix.Stat_t
	unix.Fstat(int(files[1].Fd()), &st)
	if mc.find(uint64(st.Dev), uint64(st.Ino)) >= 0 {
		t.Fatal("the least recently used file is still mapped")
	}
	unix.Fstat(int(files[0].Fd()), &st)
	if mc.find(uint64(st.Dev), uint64(st.Ino)) < 0 {
		t.Fatal("a recently used file was evicted")
	}
	if mc.bytes != mapCacheFiles*4*ps {
		t.Fatalf("%d bytes accounted, want %d", mc.bytes, mapCacheFiles*4*ps)
	}
}

func TestMapCacheSizeChecks(t *testing.T) {
	const ps = 4096
	mc := &Cache{}
	defer mc.Close()
	// Sealed against shrinking only: it may grow, and is mapped again
	// whole when it has.
	f := memfd(t, 4*ps, unix.F_SEAL_SHRINK)
	fd := int(f.Fd())
	if _, _, err := mc.Pages(fd, 0, 4*ps, ps, false); err != nil {
		t.Fatal(err)
	}
	if _, _, err := mc.Pages(fd, 4*ps, ps, ps, false); err == nil {
		t.Fatal("a page past the end was accepted")
	}
	if err := unix.Ftruncate(fd, 8*ps); err != nil {
		t.Fatal(err)
	}
	unix.Pwrite(fd, []byte("grown"), 7*ps)
	b, _, err := mc.Pages(fd, 7*ps, ps, ps, false)
	if err != nil || string(b[:5]) != "grown" {
		t.Fatalf("after growing: %v", err)
	}
	if mc.share.mapped != 2 || len(mc.maps) != 1 || mc.bytes != 8*ps {
		t.Fatalf("mapped %d times, %d mappings of %d bytes", mc.share.mapped, len(mc.maps), mc.bytes)
	}
	for _, r := range []struct {
		off    uint64
		length int
	}{{ps / 2, ps}, {0, 9 * ps}, {1 << 63, ps}, {8 * ps, ps}} {
		if _, _, err := mc.Pages(fd, r.off, r.length, ps, false); err == nil {
			t.Errorf("%d bytes at %d accepted", r.length, r.off)
		}
	}
	// Unsealed: refused, and nothing mapped.
	u := memfd(t, 4*ps, 0)
	if _, _, err := mc.Pages(int(u.Fd()), 0, ps, ps, false); !errors.Is(err, errNotSealed) {
		t.Fatalf("unsealed memfd: %v", err)
	}
	// Sealed against writing: PUT_FD may read it, GET_FD may not write it.
	ro := memfd(t, 4*ps, unix.F_SEAL_SHRINK|unix.F_SEAL_WRITE)
	if _, _, err := mc.Pages(int(ro.Fd()), 0, ps, ps, false); err != nil {
		t.Fatalf("read-only memfd for reading: %v", err)
	}
	if _, _, err := mc.Pages(int(ro.Fd()), 0, ps, ps, true); err == nil {
		t.Fatal("a memfd sealed against writing was mapped writable")
	}
	// A read-only descriptor of a file mapped writable before may not be
	// written through.
	w := memfd(t, 4*ps, unix.F_SEAL_SHRINK)
	if _, _, err := mc.Pages(int(w.Fd()), 0, ps, ps, true); err != nil {
		t.Fatal(err)
	}
	rofd, err := unix.Open(fmt.Sprintf("/proc/self/fd/%d", w.Fd()), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(rofd)
	if _, _, err := mc.Pages(rofd, 0, ps, ps, true); err == nil {
		t.Fatal("wrote through a read-only descriptor")
	}
	if _, _, err := mc.Pages(rofd, 0, ps, ps, false); err != nil {
		t.Fatalf("read through a read-only descriptor: %v", err)
	}
}

// Connections that hand over the same file share one mapping: it is made
// and pinned once, outlives the connection that made it while another
// holds it, and is unmapped and unpinned when the last lets go.
func TestMapShareAcrossConnections(t *testing.T) {
	const ps = 4096
	pin := &fakePinner{}
	share := NewShare(func() []backends.Pinner { return []backends.Pinner{pin} }, nil)
	a, b := &Cache{share: share}, &Cache{share: share}
	defer a.Close()
	defer b.Close()
	f := memfd(t, 16*ps, unix.F_SEAL_SHRINK)
	unix.Pwrite(int(f.Fd()), []byte("shared"), 3*ps)
	if _, _, err := a.Pages(int(f.Fd()), 0, ps, ps, false); err != nil {
		t.Fatal(err)
	}
	got, _, err := b.Pages(int(f.Fd()), 3*ps, ps, ps, false)
	if err != nil || string(got[:6]) != "shared" {
		t.Fatalf("second connection: %v %q", err, got[:6])
	}
	if share.mapped != 1 || pin.pinned != 1 {
		t.Fatalf("mapped %d times, pinned %d; want once each", share.mapped, pin.pinned)
	}
	a.Close()
	if pin.unpinned != 0 || len(share.files) != 1 {
		t.Fatal("the mapping went while another connection held it")
	}
	unix.Pwrite(int(f.Fd()), []byte("still"), 3*ps)
	if string(got[:5]) != "still" {
		t.Fatalf("after the first connection closed: %q", got[:5])
	}
	// A descriptor that may only write may not read through the mapping
	// another connection made.
	wo, err := unix.Open(fmt.Sprintf("/proc/self/fd/%d", f.Fd()), unix.O_WRONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(wo)
	c := &Cache{share: share}
	defer c.Close()
	if _, _, err := c.Pages(wo, 0, ps, ps, false); err == nil {
		t.Fatal("read through a write-only descriptor")
	}
	b.Close()
	c.Close()
	if pin.unpinned != 1 || len(share.files) != 0 {
		t.Fatalf("after every connection let go: unpinned %d, %d files mapped", pin.unpinned, len(share.files))
	}
}

// Connections taking, using and letting go of the same files at once
// (run with -race).
func TestMapShareConcurrent(t *testing.T) {
	const ps = 4096
	share := NewShare(nil, nil)
	var files []*os.File
	for range mapCacheFiles + 2 {
		files = append(files, memfd(t, 8*populateChunk/4, unix.F_SEAL_SHRINK))
	}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			mc := &Cache{share: share}
			defer mc.Close()
			for i := range 200 {
				f := files[(g*7+i)%len(files)]
				off := uint64(i%16) * ps
				mem, _, err := mc.Pages(int(f.Fd()), off, ps, ps, i%3 == 0)
				if err != nil {
					t.Error(err)
					return
				}
				_ = mem[ps-1]
				if i%3 == 0 {
					mem[0] = byte(g)
				}
			}
		}()
	}
	wg.Wait()
	if len(share.files) != 0 {
		t.Fatalf("%d files still mapped after every connection closed", len(share.files))
	}
}

// FuzzMapPages maps arbitrary ranges of a sealed memfd: out-of-range and
// misaligned requests are refused, accepted ones are readable to the end.
func FuzzMapPages(f *testing.F) {
	buf, err := client.NewPageBuffer(16 * 4096)
	if err != nil {
		f.Fatal(err)
	}
	defer buf.Close()
	f.Add(uint64(0), 4096)
	f.Add(uint64(61440), 8192)
	f.Add(uint64(1<<63), 4096)
	f.Fuzz(func(t *testing.T, off uint64, length int) {
		if length <= 0 || length > 1<<30 {
			return
		}
		fd := int(buf.Fd())
		var mc Cache
		defer mc.Close()
		mem, temp, err := mc.Pages(fd, off, length, 4096, off%8192 == 0)
		if err != nil {
			return
		}
		if temp {
			defer unix.Munmap(mem)
		}
		if off%4096 != 0 || off+uint64(length) > 16*4096 {
			t.Fatalf("accepted %d bytes at %d", length, off)
		}
		_ = mem[len(mem)-1]
	})
}
