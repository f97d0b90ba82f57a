package bench

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The kernel's zram, measured on the same pages as s4d and the way s4d is
// measured: a fresh device is hot-added with lz4, the pages are written
// to it with O_DIRECT in I/Os of one batch (batch x page size) by as many
// threads as s4d has clients, each taking the next I/O as it finishes the
// last, read back the same way and compared; mm_stat gives the ratio, and
// the device is reset and removed. It is never used as swap.
//
// Why it is written the way it is. An earlier version read back into
// freshly mapped memory, so every read also faulted its destination in
// (the kernel pins each user page for O_DIRECT, faulting it first): on
// 128 MiB of a Python heap with three pages in four zeroed it read at
// 0.23-0.48 GB/s and 2-3.4 core-s/GB where a C program read at 0.9-1.4
// GB/s and 0.25 (the heap as it is: 0.68-1.0 against 0.47-0.54); now both
// buffers are faulted in first, as s4d's are (runInproc touches its
// outputs; the daemon's arena is warm). Its write side was not slower
// than C's in CPU: 1.30 against 1.26 core-s/GB (medians of 8 runs each,
// taking turns, on a Python heap), 0.43-0.45 (three runs of four) against
// 0.44-0.50 on the zero-rich one; the C figure, 2.27 GB/s at 0.4,
// fits such a heap. What made it look slow was wall time on a shared
// 2-core machine: one writer's run took 0.26-1.97 GB/s at the same CPU
// per GB, off the CPU up to 88% of the time while other programs ran
// (hence --repeat, and the medians of paired runs in tests/zram_test.go).
// Smaller things it did unlike a C program, changed here: each I/O went
// through the runtime's syscall entry, 10-15% more CPU per GB (see pio);
// its goroutines were started inside the clock, sharing a few OS threads
// (workers now lock an OS thread each and wait for the start); and no
// garbage collection ran before the clock, though the reference run just
// before leaves about twice the corpus as garbage (no effect was
// measurable, but a collection's mark workers would count as zram's CPU).
const zramControl = "/sys/class/zram-control"

// zramDevice is a fresh lz4 zram device, ours alone.
type zramDevice struct {
	id   string // its number, as hot_add gave it
	sys  string // /sys/block/zramN/
	path string // /dev/zramN
}

// newZram hot-adds a device of size bytes with lz4.
func newZram(size int) (*zramDevice, error) {
	if _, err := os.Stat(zramControl); err != nil {
		return nil, errors.New("--vs-zram: this kernel has no zram (no " + zramControl + ")")
	}
	raw, err := os.ReadFile(zramControl + "/hot_add")
	if err != nil {
		return nil, fmt.Errorf("--vs-zram: hot_add (needs root): %w", err)
	}
	id := strings.TrimSpace(string(raw))
	d := &zramDevice{id: id, sys: "/sys/block/zram" + id + "/", path: "/dev/zram" + id}
	// comp_algorithm must be set before disksize, which makes the device.
	for _, kv := range [][2]string{{"comp_algorithm", "lz4"}, {"disksize", strconv.Itoa(size)}} {
		if err := os.WriteFile(d.sys+kv[0], []byte(kv[1]), 0); err != nil {
			d.close()
			return nil, fmt.Errorf("--vs-zram: zram%s %s: %w", id, kv[0], err)
		}
	}
	return d, nil
}

// storedBytes is what the device's pages take compressed: compr_data_size
// of mm_stat (zero and same-filled pages take none there, as in s4d).
func (d *zramDevice) storedBytes() (int64, error) {
	st, err := os.ReadFile(d.sys + "mm_stat")
	if err != nil {
		return 0, err
	}
	f := strings.Fields(string(st))
	if len(f) < 3 {
		return 0, fmt.Errorf("--vs-zram: mm_stat %q", st)
	}
	return strconv.ParseInt(f[1], 10, 64)
}

func (d *zramDevice) close() {
	os.WriteFile(d.sys+"reset", []byte("1"), 0)
	os.WriteFile(zramControl+"/hot_remove", []byte(d.id), 0)
}

// zramBlock is zram's logical block: O_DIRECT I/Os are whole ones.
const zramBlock = 4096

// MeasureZram measures kernel zram with lz4 on pages, in I/Os of batch
// pages, clients threads at once: the row --vs-zram adds. It is exported
// for tests/zram_test.go, which checks it against a C program.
func MeasureZram(pages []byte, pageSize, batch, clients int) (r Result, err error) {
	ioSize := batch * pageSize
	if ioSize%zramBlock != 0 || len(pages)%zramBlock != 0 {
		return r, fmt.Errorf("--vs-zram: zram does I/O in whole %d-byte blocks; batch %d of %d-byte pages is not", zramBlock, batch, pageSize)
	}
	if len(pages) == 0 {
		return r, errors.New("--vs-zram: no pages")
	}
	dev, err := newZram(len(pages))
	if err != nil {
		return r, err
	}
	defer dev.close()

	// Both buffers are mapped and faulted in before the clock starts, as
	// s4d's own are (runInproc touches its outputs; the daemon's arena is
	// warm): a fault in either would be timed as zram's. Mapped rather than
	// made by Go for O_DIRECT's alignment.
	src, err := unix.Mmap(-1, 0, len(pages), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return r, err
	}
	defer unix.Munmap(src)
	copy(src, pages)
	dst, err := unix.Mmap(-1, 0, len(pages), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return r, err
	}
	defer unix.Munmap(dst)
	touch(dst) // also makes a block that was never read differ

	fds := make([]int, clients)
	for c := range fds {
		if fds[c], err = unix.Open(dev.path, unix.O_RDWR|unix.O_DIRECT|unix.O_CLOEXEC, 0); err != nil {
			return r, fmt.Errorf("--vs-zram: %s: %w", dev.path, err)
		}
		defer unix.Close(fds[c])
	}

	r = Result{Mode: "kernel", Backend: "zram", Codec: "lz4", Batch: batch, Clients: clients,
		Pages: len(pages) / pageSize, OrigBytes: int64(len(pages))}
	var putCPU, getCPU float64
	var putLat, getLat []time.Duration
	if r.PutSeconds, putCPU, putLat, err = zramPhase(dev.path, fds, src, ioSize, true); err != nil {
		return r, err
	}
	if r.GetSeconds, getCPU, getLat, err = zramPhase(dev.path, fds, dst, ioSize, false); err != nil {
		return r, err
	}
	if !bytes.Equal(dst, pages) {
		return r, errors.New("--vs-zram: zram returned other bytes")
	}
	if r.StoredBytes, err = dev.storedBytes(); err != nil {
		return r, err
	}
	r.PutLatency, r.GetLatency = summarise(putLat), summarise(getLat)
	r.finish(putCPU, getCPU)
	return r, nil
}

// zramPhase writes buf to the device from offset 0 (or reads it back) in
// I/Os of ioSize bytes, one OS thread per fd, each taking the next I/O as
// it finishes the last, as fanOut hands batches to s4d's clients. It
// returns the wall seconds, the process's CPU seconds (getrusage, as for
// s4d in-process) and every I/O's latency.
//
// The workers are started, each locked to an OS thread of its own, before
// the clock starts, and a garbage collection is run before it too, so
// that neither the collection of earlier runs' garbage nor the making of
// threads is timed: the phase itself allocates nothing.
func zramPhase(dev string, fds []int, buf []byte, ioSize int, write bool) (secs, cpu float64, lat []time.Duration, err error) {
	n := (len(buf) + ioSize - 1) / ioSize
	lat = make([]time.Duration, n)
	errs := make([]error, len(fds))
	var next atomic.Int64
	var ready, done sync.WaitGroup
	start := make(chan struct{})
	for c, fd := range fds {
		ready.Add(1)
		done.Add(1)
		go func() {
			defer done.Done()
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			ready.Done()
			<-start
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				off := i * ioSize
				b := buf[off:min(off+ioSize, len(buf))]
				t := time.Now()
				k, err := pio(write, fd, b, int64(off))
				lat[i] = time.Since(t)
				if err == nil && k != len(b) {
					err = fmt.Errorf("short I/O: %d of %d bytes", k, len(b))
				}
				if err != nil {
					errs[c] = fmt.Errorf("--vs-zram: %s at %d: %w", dev, off, err)
					next.Store(int64(n)) // stop the others
					return
				}
			}
		}()
	}
	// One P per worker, so that every worker can be in its system call at
	// once however few cores Go was given, as every C thread can.
	if p := runtime.GOMAXPROCS(0); p < len(fds) {
		runtime.GOMAXPROCS(len(fds))
		defer runtime.GOMAXPROCS(p)
	}
	ready.Wait()
	runtime.GC()
	cpu0, t0 := processCPU(), time.Now()
	close(start)
	done.Wait()
	secs, cpu = time.Since(t0).Seconds(), processCPU()-cpu0
	return secs, cpu, lat, errors.Join(errs...)
}

// pio is one pwrite(2) (or pread(2)) as a raw system call: the worker keeps
// its P through it, as a C thread simply blocks. Through the runtime's
// ordinary entry (unix.Pwrite), the process spent 10-15% more CPU per GB
// on one thread, runs of the two taking turns on a 64 MiB mixed corpus
// (medians of 20: write 1.58 and 1.50 against 1.38 and 1.35 core-s/GB
// raw, read 0.57 against 0.51-0.53), where the raw call matches the C
// program of tests/zram_test.go.
func pio(write bool, fd int, b []byte, off int64) (int, error) {
	nr := uintptr(unix.SYS_PREAD64)
	if write {
		nr = unix.SYS_PWRITE64
	}
	for {
		n, _, e := unix.RawSyscall6(nr, uintptr(fd), uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)), uintptr(off), 0, 0)
		switch e {
		case 0:
			return int(n), nil
		case unix.EINTR:
			continue
		}
		return 0, e
	}
}
