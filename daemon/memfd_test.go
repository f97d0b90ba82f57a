package daemon

import (
	"errors"
	"fmt"
	"os"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/s4d-project/s4d/backends"
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
	mc := &mapCache{pinners: func() []backends.Pinner { return []backends.Pinner{pin, failing} }}
	defer mc.close()
	f := memfd(t, 64*ps, unix.F_SEAL_SHRINK)
	fd := int(f.Fd())

	a, temp, err := mc.pages(fd, 0, 4*ps, ps, false)
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
	b, _, err := mc.pages(dup, 8*ps, 4*ps, ps, false)
	if err != nil || string(b[:5]) != "hello" {
		t.Fatalf("second map: %v %q", err, b[:5])
	}
	if mc.mapped != 1 || pin.pinned != 1 {
		t.Fatalf("mapped %d times, pinned %d times; want 1 and 1", mc.mapped, pin.pinned)
	}
	_ = a
	// Writable on demand: mapped again once, then reused for both.
	w, _, err := mc.pages(fd, 0, ps, ps, true)
	if err != nil {
		t.Fatal(err)
	}
	copy(w, "from the daemon")
	got := make([]byte, 15)
	unix.Pread(fd, got, 0)
	if string(got) != "from the daemon" {
		t.Fatalf("write through the mapping: %q", got)
	}
	if _, _, err := mc.pages(fd, ps, ps, ps, false); err != nil {
		t.Fatal(err)
	}
	if mc.mapped != 2 || pin.unpinned != 1 || len(mc.maps) != 1 {
		t.Fatalf("after upgrade: mapped %d, unpinned %d, %d mappings", mc.mapped, pin.unpinned, len(mc.maps))
	}
	mc.close()
	if pin.unpinned != pin.pinned || mc.bytes != 0 {
		t.Fatalf("close: pinned %d unpinned %d, %d bytes left", pin.pinned, pin.unpinned, mc.bytes)
	}
}

func TestMapCacheEviction(t *testing.T) {
	const ps = 4096
	mc := &mapCache{}
	defer mc.close()
	var files []*os.File
	for range mapCacheFiles + 1 {
		files = append(files, memfd(t, 4*ps, unix.F_SEAL_SHRINK))
	}
	for i, f := range files[:mapCacheFiles] {
		if _, _, err := mc.pages(int(f.Fd()), 0, ps, ps, false); err != nil {
			t.Fatalf("file %d: %v", i, err)
		}
	}
	// Touch the first again: the second is now the least recently used.
	mc.pages(int(files[0].Fd()), 0, ps, ps, false)
	mc.pages(int(files[mapCacheFiles].Fd()), 0, ps, ps, false)
	if len(mc.maps) != mapCacheFiles {
		t.Fatalf("%d files mapped, limit %d", len(mc.maps), mapCacheFiles)
	}
	var st unix.Stat_t
	unix.Fstat(int(files[1].Fd()), &st)
	if mc.find(uint64(st.Dev), uint64(st.Ino)) != nil {
		t.Fatal("the least recently used file is still mapped")
	}
	unix.Fstat(int(files[0].Fd()), &st)
	if mc.find(uint64(st.Dev), uint64(st.Ino)) == nil {
		t.Fatal("a recently used file was evicted")
	}
	if mc.bytes != mapCacheFiles*4*ps {
		t.Fatalf("%d bytes accounted, want %d", mc.bytes, mapCacheFiles*4*ps)
	}
}

func TestMapCacheSizeChecks(t *testing.T) {
	const ps = 4096
	mc := &mapCache{}
	defer mc.close()
	// Sealed against shrinking only: it may grow, and is mapped again
	// whole when it has.
	f := memfd(t, 4*ps, unix.F_SEAL_SHRINK)
	fd := int(f.Fd())
	if _, _, err := mc.pages(fd, 0, 4*ps, ps, false); err != nil {
		t.Fatal(err)
	}
	if _, _, err := mc.pages(fd, 4*ps, ps, ps, false); err == nil {
		t.Fatal("a page past the end was accepted")
	}
	if err := unix.Ftruncate(fd, 8*ps); err != nil {
		t.Fatal(err)
	}
	unix.Pwrite(fd, []byte("grown"), 7*ps)
	b, _, err := mc.pages(fd, 7*ps, ps, ps, false)
	if err != nil || string(b[:5]) != "grown" {
		t.Fatalf("after growing: %v", err)
	}
	if mc.mapped != 2 || len(mc.maps) != 1 || mc.bytes != 8*ps {
		t.Fatalf("mapped %d times, %d mappings of %d bytes", mc.mapped, len(mc.maps), mc.bytes)
	}
	for _, r := range []struct {
		off    uint64
		length int
	}{{ps / 2, ps}, {0, 9 * ps}, {1 << 63, ps}, {8 * ps, ps}} {
		if _, _, err := mc.pages(fd, r.off, r.length, ps, false); err == nil {
			t.Errorf("%d bytes at %d accepted", r.length, r.off)
		}
	}
	// Unsealed: refused, and nothing mapped.
	u := memfd(t, 4*ps, 0)
	if _, _, err := mc.pages(int(u.Fd()), 0, ps, ps, false); !errors.Is(err, errNotSealed) {
		t.Fatalf("unsealed memfd: %v", err)
	}
	// Sealed against writing: PUT_FD may read it, GET_FD may not write it.
	ro := memfd(t, 4*ps, unix.F_SEAL_SHRINK|unix.F_SEAL_WRITE)
	if _, _, err := mc.pages(int(ro.Fd()), 0, ps, ps, false); err != nil {
		t.Fatalf("read-only memfd for reading: %v", err)
	}
	if _, _, err := mc.pages(int(ro.Fd()), 0, ps, ps, true); err == nil {
		t.Fatal("a memfd sealed against writing was mapped writable")
	}
	// A read-only descriptor of a file mapped writable before may not be
	// written through.
	w := memfd(t, 4*ps, unix.F_SEAL_SHRINK)
	if _, _, err := mc.pages(int(w.Fd()), 0, ps, ps, true); err != nil {
		t.Fatal(err)
	}
	rofd, err := unix.Open(fmt.Sprintf("/proc/self/fd/%d", w.Fd()), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(rofd)
	if _, _, err := mc.pages(rofd, 0, ps, ps, true); err == nil {
		t.Fatal("wrote through a read-only descriptor")
	}
	if _, _, err := mc.pages(rofd, 0, ps, ps, false); err != nil {
		t.Fatalf("read through a read-only descriptor: %v", err)
	}
}
