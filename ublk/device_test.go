package ublk

import (
	"bytes"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/s4d-project/s4d/swapio"
)

// alignedBuf is n bytes on a page boundary, for O_DIRECT.
func alignedBuf(n int) []byte {
	b := make([]byte, n+4096)
	off := int(-uintptr(unsafe.Pointer(&b[0])) & 4095)
	return b[off : off+n]
}

// TestDeviceUnderKernel runs only where the kernel has ublk (the guest of
// tests/guest): a real device, written and read through the block layer.
func TestDeviceUnderKernel(t *testing.T) {
	if err := Available(); err != nil {
		t.Skip(err)
	}
	if err := swapio.Available(); err != nil {
		t.Skip(err)
	}
	st, err := swapio.NewStore(64<<20, swapio.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	d, err := Create(Options{Size: 64 << 20, Queues: 2, Depth: 16, MaxIO: 64 << 10, Server: st})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := d.Close(); err != nil {
			t.Error(err)
		}
		if Exists(d.BlockPath()) {
			t.Errorf("%s still there after Close", d.BlockPath())
		}
	}()
	t.Logf("%s up; %d of %d queue threads on their queue's CPUs", d.BlockPath(), d.PinnedQueues(), d.Queues())
	fd, err := unix.Open(d.BlockPath(), unix.O_RDWR|unix.O_DIRECT, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	// Never written: zeros.
	buf := alignedBuf(64 << 10)
	if _, err := unix.Pread(fd, buf, 1<<20); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(buf, make([]byte, len(buf))) {
		t.Fatal("a block never written did not read as zeros")
	}
	// Writes of several sizes from several threads at once, read back.
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			b := alignedBuf(32 << 10)
			for i := 0; i < 64; i++ {
				off := int64((w*64+i)*(32<<10)) % (60 << 20)
				n := 4096 * (1 + i%8)
				for j := range b[:n] {
					b[j] = byte(w*31 + i + j/4096)
				}
				if _, err := unix.Pwrite(fd, b[:n], off); err != nil {
					errs <- err
					return
				}
				r := alignedBuf(n)
				if _, err := unix.Pread(fd, r, off); err != nil {
					errs <- err
					return
				}
				if !bytes.Equal(r, b[:n]) {
					errs <- fmt.Errorf("writer %d: %d bytes at %d read back different", w, n, off)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	stored := st.Stats().Pages
	if stored == 0 {
		t.Fatal("nothing reached the store")
	}
	// A discard forgets the pages: they read as zeros again.
	rng := [2]uint64{0, 60 << 20}
	if _, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.BLKDISCARD, uintptr(unsafe.Pointer(&rng))); e != 0 {
		t.Fatalf("BLKDISCARD: %v", e)
	}
	if left := st.Stats().Pages; left != 0 {
		t.Errorf("%d pages left after discarding them all (of %d)", left, stored)
	}
	if _, err := unix.Pread(fd, buf, 0); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(buf, make([]byte, len(buf))) {
		t.Fatal("a discarded block did not read as zeros")
	}
	q := d.NativeStats()
	t.Logf("stats: %d waits, %d requests, writes %d calls/%d pages, reads %d calls/%d pages, %d discards",
		q.Waits, q.Requests, q.Writes, q.WritePages, q.Reads, q.ReadPages, q.Discards)
}

// TestDeviceHoldsWritesWithoutMemory: a write that finds no slab waits
// for the refill instead of failing (the kernel would send it again at
// once, and reclaim would spin), and fails once held for
// swapio.HoldWrites with the refill still short of memory. Under the
// kernel, as TestDeviceUnderKernel.
func TestDeviceHoldsWritesWithoutMemory(t *testing.T) {
	if err := Available(); err != nil {
		t.Skip(err)
	}
	if err := swapio.Available(); err != nil {
		t.Skip(err)
	}
	// One slab of reserve, never grown: 15 raw pages fit in it.
	st, err := swapio.NewStore(16<<20, swapio.Options{Reserve: swapio.SlabSize, MaxReserve: swapio.SlabSize})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	d, err := Create(Options{Size: 16 << 20, Queues: 1, Depth: 16, MaxIO: 64 << 10, Server: st})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	fd, err := unix.Open(d.BlockPath(), unix.O_RDWR|unix.O_DIRECT, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	random := func(n int, seed byte) []byte { // incompressible: raw pages, a slab's worth each 15
		b := alignedBuf(n)
		x := uint32(seed) | 1
		for i := range b {
			x ^= x << 13
			x ^= x >> 17
			x ^= x << 5
			b[i] = byte(x)
		}
		return b
	}
	write := func(b []byte, off int64) chan error {
		c := make(chan error, 1)
		go func() { _, err := unix.Pwrite(fd, b, off); c <- err }()
		return c
	}

	// Sixteen pages in one request, the refill paused: held, not failed.
	resume := st.PauseRefill()
	data := random(64<<10, 1)
	done := write(data, 0)
	for d.NativeStats().Held == 0 {
		select {
		case err := <-done:
			resume()
			t.Fatalf("a write with no slab to take ended (%v) without being held", err)
		case <-time.After(time.Millisecond):
		}
	}
	resume()
	if err := <-done; err != nil {
		t.Fatalf("the held write failed once the refill ran: %v", err)
	}
	got := alignedBuf(64 << 10)
	if _, err := unix.Pread(fd, got, 0); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("the held write read back different (%v)", err)
	}

	// The refill paused for longer than a write is held: the write fails,
	// counted, and what was stored before is intact.
	resume = st.PauseRefill()
	err = <-write(random(1<<20, 2), 1<<20)
	resume()
	if err == nil {
		t.Fatal("1 MiB written with the refill paused and one slab of reserve")
	}
	s := d.NativeStats()
	if s.HeldFailed == 0 {
		t.Fatalf("the write failed (%v) but no held write is counted failed: %+v", err, s)
	}
	if _, err := unix.Pread(fd, got, 0); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("a failed write elsewhere changed stored pages (%v)", err)
	}
	// And with the refill running, writes go through again.
	data = random(64<<10, 3)
	if err := <-write(data, 2<<20); err != nil {
		t.Fatalf("after the refill resumed: %v", err)
	}
	t.Logf("held %d writes, %d failed after %v: %v", s.Held, s.HeldFailed, swapio.HoldWrites, err)
}

// A block size other than 4 KiB is refused before the kernel is asked.
func TestOptionsRefused(t *testing.T) {
	for _, o := range []Options{{Size: 1 << 20, BlockSize: 512}, {Size: 100}, {Size: 1 << 20, Depth: 5000},
		{Size: 1 << 20, MaxIO: 1000}, {Size: 1 << 20, Queues: 1000}} {
		o.Server = noServer{}
		if _, err := Create(o); err == nil || errors.Is(err, ErrUnavailable) {
			t.Errorf("%+v: got %v, want a refusal of the options", o, err)
		}
	}
	if _, err := Create(Options{Size: 1 << 20}); err == nil || errors.Is(err, ErrUnavailable) {
		t.Errorf("no store: got %v, want a refusal", err)
	}
}

// noServer is a store never served from: Create refuses the options first.
type noServer struct{}

func (noServer) Ops() swapio.Ops { return swapio.Ops{} }
