package ublk

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// lockedStore lets several queues share a memStore.
type lockedStore struct {
	mu sync.Mutex
	m  *memStore
}

func (l *lockedStore) Put(k []uint64, p []byte) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.m.Put(k, p)
}

func (l *lockedStore) Get(k []uint64, d []byte, miss, failed []bool) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.m.Get(k, d, miss, failed)
}

func (l *lockedStore) Delete(k []uint64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.m.Delete(k)
}

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
	st := &lockedStore{m: newMemStore()}
	d, err := Create(Options{Size: 64 << 20, Queues: 2, Depth: 16, MaxIO: 64 << 10}, st)
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
	t.Logf("%s up; flusher mark: %v", d.BlockPath(), d.Flusher)
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
	st.mu.Lock()
	stored := len(st.m.pages)
	st.mu.Unlock()
	if stored == 0 {
		t.Fatal("nothing reached the store")
	}
	// A discard forgets the pages: they read as zeros again.
	rng := [2]uint64{0, 60 << 20}
	if _, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.BLKDISCARD, uintptr(unsafe.Pointer(&rng))); e != 0 {
		t.Fatalf("BLKDISCARD: %v", e)
	}
	st.mu.Lock()
	left := len(st.m.pages)
	st.mu.Unlock()
	if left != 0 {
		t.Errorf("%d pages left after discarding them all (of %d)", left, stored)
	}
	if _, err := unix.Pread(fd, buf, 0); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(buf, make([]byte, len(buf))) {
		t.Fatal("a discarded block did not read as zeros")
	}
	t.Logf("stats: %d waits, %d requests, writes %d calls/%d pages, reads %d calls/%d pages, %d discarded",
		d.Stats.Waits.Load(), d.Stats.Requests.Load(), d.Stats.Writes.Calls.Load(), d.Stats.Writes.Pages.Load(),
		d.Stats.Reads.Calls.Load(), d.Stats.Reads.Pages.Load(), d.Stats.Discarded.Load())
}

// A block size other than 4 KiB is refused before the kernel is asked.
func TestOptionsRefused(t *testing.T) {
	for _, o := range []Options{{Size: 1 << 20, BlockSize: 512}, {Size: 100}, {Size: 1 << 20, Depth: 5000},
		{Size: 1 << 20, MaxIO: 1000}, {Size: 1 << 20, Queues: 1000}} {
		if _, err := Create(o, nil); err == nil || errors.Is(err, ErrUnavailable) {
			t.Errorf("%+v: got %v, want a refusal of the options", o, err)
		}
	}
	_ = os.Getpagesize
}

// A queue is stuck while it serves one batch for longer than the limit,
// and never between batches.
func TestStuckFor(t *testing.T) {
	d := &Device{queues: []*queue{{}, {}}}
	now := time.Now().UnixNano()
	if d.StuckFor(time.Second, now) {
		t.Fatal("stuck between batches")
	}
	d.queues[1].since.Store(now - int64(500*time.Millisecond))
	if d.StuckFor(time.Second, now) {
		t.Fatal("stuck after half the limit")
	}
	if !d.StuckFor(250*time.Millisecond, now) {
		t.Fatal("not stuck after twice the limit")
	}
}
