package vk

import (
	"bytes"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// open opens the device the tests run on (lavapipe without a GPU),
// skipping where there is none unless S4D_REQUIRE_VULKAN is set.
func open(t *testing.T) *Device {
	t.Helper()
	d, err := Open(Options{Device: -1})
	if err != nil {
		var u *Unavailable
		if errors.As(err, &u) && os.Getenv("S4D_REQUIRE_VULKAN") == "" {
			t.Skip(err)
		}
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	t.Logf("%+v", d.Info())
	return d
}

// memfd returns a sealed memfd of size bytes mapped shared (writable or
// not), as a client hands its pages to the daemon, filled with a pattern.
func memfd(t *testing.T, size int, seed byte, prot int) (rw, mapped []byte) {
	t.Helper()
	fd, err := unix.MemfdCreate("s4d-vk-test", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	if err := unix.Ftruncate(fd, int64(size)); err != nil {
		t.Fatal(err)
	}
	rw, err = unix.Mmap(fd, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Munmap(rw) })
	for i := range rw {
		rw[i] = byte(i*7+i>>12) ^ seed
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_SHRINK|unix.F_SEAL_GROW|unix.F_SEAL_SEAL); err != nil {
		t.Fatal(err)
	}
	mapped, err = unix.Mmap(fd, 0, size, prot, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Munmap(mapped) })
	return rw, mapped
}

// TestRoundTrip moves a memfd's pages to the device in scattered runs
// (more copies than the ring holds, so command buffers are reused) and
// back into a second memfd in another order, through imported memory.
func TestRoundTrip(t *testing.T) {
	d := open(t)
	if !d.Info().HostImport {
		t.Skip("no VK_EXT_external_memory_host")
	}
	const page, pages = 4096, 512
	src, srcMap := memfd(t, page*pages, 1, unix.PROT_READ|unix.PROT_WRITE)
	dst, dstMap := memfd(t, page*pages, 2, unix.PROT_READ|unix.PROT_WRITE)
	up, err := d.Import(srcMap)
	if err != nil {
		t.Fatal(err)
	}
	defer up.Release()
	down, err := d.Import(dstMap)
	if err != nil {
		t.Fatal(err)
	}
	defer down.Release()
	dev, err := d.NewBuffer(page * pages)
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Release()

	// Up: 32 copies of 16 pages, each a run of 4 regions of 4 pages taken
	// from the four quarters of the memfd, so device order differs from
	// host order: device page 16c+4q+k = host page q*128 + 4c + k.
	perm := make([]int, pages)
	var last Ticket
	for c := 0; c < 32; c++ {
		var rs []Region
		for q := 0; q < 4; q++ {
			hp, dp := q*128+4*c, 16*c+4*q
			rs = append(rs, Region{Src: int64(hp * page), Dst: int64(dp * page), Size: 4 * page})
			for k := 0; k < 4; k++ {
				perm[dp+k] = hp + k
			}
		}
		if last, err = d.Copy(dev, up, rs, Ticket{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.Wait(last, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	// Down: whole device buffer in 8 copies; dst then holds device order.
	for c := 0; c < 8; c++ {
		n := int64(pages / 8 * page)
		if last, err = d.Copy(down, dev, []Region{{Src: int64(c) * n, Dst: int64(c) * n, Size: n}}, Ticket{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.Wait(last, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if ok, err := d.Done(last); err != nil || !ok {
		t.Fatalf("Done(%+v) = %v, %v after Wait", last, ok, err)
	}
	for p := 0; p < pages; p++ {
		if !bytes.Equal(dst[p*page:(p+1)*page], src[perm[p]*page:(perm[p]+1)*page]) {
			t.Fatalf("device page %d is not host page %d", p, perm[p])
		}
	}
}

// TestImportRefused: misaligned memory is refused before the driver sees
// it, as ErrImportRefused, and the device stays usable.
func TestImportRefused(t *testing.T) {
	d := open(t)
	if !d.Info().HostImport {
		t.Skip("no VK_EXT_external_memory_host")
	}
	_, m := memfd(t, 4*4096, 3, unix.PROT_READ|unix.PROT_WRITE)
	for _, bad := range [][]byte{m[1:4097], m[:100], m[:0]} {
		if b, err := d.Import(bad); !errors.Is(err, ErrImportRefused) {
			if b != nil {
				b.Release()
			}
			t.Fatalf("Import(%d bytes, misaligned or empty) = %v, want ErrImportRefused", len(bad), err)
		}
	}
	b, err := d.Import(m[4096:])
	if err != nil {
		t.Fatalf("an aligned import after refusals: %v", err)
	}
	b.Release()
}

// TestCopyBounds: a region outside either buffer is refused here, not
// handed to the driver.
func TestCopyBounds(t *testing.T) {
	d := open(t)
	a, err := d.NewBuffer(8192)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Release()
	b, err := d.NewBuffer(4096)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Release()
	for _, r := range []Region{{0, 0, 8192}, {4096, 1, 4096}, {-1, 0, 16}, {0, 0, 0}} {
		if _, err := d.Copy(b, a, []Region{r}, Ticket{}); err == nil {
			t.Errorf("Copy %+v into 4096 bytes from 8192 accepted", r)
		}
	}
	if t1, err := d.Copy(b, a, []Region{{4096, 0, 4096}}, Ticket{}); err != nil {
		t.Fatal(err)
	} else if err := d.Wait(t1, 10*time.Second); err != nil {
		t.Fatal(err)
	}
}

// TestUnavailable: a missing library is an Unavailable with the reason.
func TestUnavailable(t *testing.T) {
	_, err := Open(Options{Lib: "/nonexistent/libvulkan.so.1", Device: -1})
	var u *Unavailable
	if !errors.As(err, &u) || u.Reason == "" {
		t.Fatalf("Open(missing library) = %v, want *Unavailable with a reason", err)
	}
}

// TestRobust: RobustOff opens without robust buffer access, RobustOn with
// it or not at all, RobustAuto as the device allows.
func TestRobust(t *testing.T) {
	open(t) // skips without Vulkan
	t.Setenv("S4D_VULKAN_ROBUST", "")
	for _, c := range []struct {
		r    Robustness
		name string
	}{{RobustOff, "off"}, {RobustOn, "on"}, {RobustAuto, "auto"}} {
		d, err := Open(Options{Device: -1, Robust: c.r})
		if err != nil {
			if c.r == RobustOn && strings.Contains(err.Error(), "robustBufferAccess2") {
				t.Logf("%s: %v", c.name, err)
				continue
			}
			t.Fatalf("%s: %v", c.name, err)
		}
		got := d.Info().Robust
		d.Close()
		t.Logf("%s: robust buffer access %v", c.name, got)
		if (c.r == RobustOff && got) || (c.r == RobustOn && !got) {
			t.Errorf("%s: robust buffer access %v", c.name, got)
		}
	}
}
