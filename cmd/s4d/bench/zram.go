package bench

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// The kernel's zram, measured on the same pages as s4d: a fresh device is
// hot-added with lz4, the pages are written through it and read back with
// O_DIRECT by as many threads as s4d has clients, its mm_stat gives the
// ratio, and the device is reset and removed. It is never used as swap.
const zramControl = "/sys/class/zram-control"

// zramIO is the size of one O_DIRECT read or write.
const zramIO = 1 << 20

// runZram measures kernel zram with lz4 on pages, clients threads at once.
func runZram(pages []byte, pageSize, clients int) (r Result, err error) {
	if _, err := os.Stat(zramControl); err != nil {
		return r, errors.New("--vs-zram: this kernel has no zram (no " + zramControl + ")")
	}
	raw, err := os.ReadFile(zramControl + "/hot_add")
	if err != nil {
		return r, fmt.Errorf("--vs-zram: hot_add (needs root): %w", err)
	}
	id := strings.TrimSpace(string(raw))
	sys := "/sys/block/zram" + id + "/"
	defer func() {
		os.WriteFile(sys+"reset", []byte("1"), 0)
		os.WriteFile(zramControl+"/hot_remove", []byte(id), 0)
	}()
	// The device holds whole I/O units; the tail of the corpus is padded
	// with zero pages, which zram stores as nothing and s4d as nothing.
	size := (len(pages) + zramIO - 1) / zramIO * zramIO
	for _, kv := range [][2]string{{"comp_algorithm", "lz4"}, {"disksize", strconv.Itoa(size)}} {
		if err := os.WriteFile(sys+kv[0], []byte(kv[1]), 0); err != nil {
			return r, fmt.Errorf("--vs-zram: zram%s %s: %w", id, kv[0], err)
		}
	}
	dev := "/dev/zram" + id
	buf, err := unix.Mmap(-1, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return r, err
	}
	defer unix.Munmap(buf)
	copy(buf, pages) // O_DIRECT wants aligned memory

	r = Result{Mode: "kernel", Backend: "zram", Codec: "lz4", Batch: zramIO / pageSize, Clients: clients,
		Pages: len(pages) / pageSize, OrigBytes: int64(len(pages))}
	cpu0, t0 := processCPU(), time.Now()
	if err := zramIOs(dev, buf, clients, true); err != nil {
		return r, err
	}
	r.PutSeconds = time.Since(t0).Seconds()
	putCPU := processCPU() - cpu0
	back, err := unix.Mmap(-1, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return r, err
	}
	defer unix.Munmap(back)
	cpu0, t0 = processCPU(), time.Now()
	if err := zramIOs(dev, back, clients, false); err != nil {
		return r, err
	}
	r.GetSeconds = time.Since(t0).Seconds()
	getCPU := processCPU() - cpu0
	if !bytes.Equal(back[:len(pages)], pages) {
		return r, errors.New("--vs-zram: zram returned other bytes")
	}
	st, err := os.ReadFile(sys + "mm_stat")
	if err != nil {
		return r, err
	}
	f := strings.Fields(string(st))
	if len(f) < 3 {
		return r, fmt.Errorf("--vs-zram: mm_stat %q", st)
	}
	// orig_data_size counts what zram stored as data; its compressed size
	// is compr_data_size (zero and same-filled pages take none, as in s4d).
	r.StoredBytes, _ = strconv.ParseInt(f[1], 10, 64)
	r.finish(putCPU, getCPU)
	return r, nil
}

// zramIOs writes buf to dev (or reads it back) with O_DIRECT, clients
// threads each taking every clients-th I/O unit.
func zramIOs(dev string, buf []byte, clients int, write bool) error {
	flags := unix.O_RDONLY
	if write {
		flags = unix.O_WRONLY
	}
	var wg sync.WaitGroup
	errs := make([]error, clients)
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			fd, err := unix.Open(dev, flags|unix.O_DIRECT|unix.O_CLOEXEC, 0)
			if err != nil {
				errs[c] = fmt.Errorf("--vs-zram: %s: %w", dev, err)
				return
			}
			defer unix.Close(fd)
			for off := c * zramIO; off < len(buf); off += clients * zramIO {
				var n int
				if write {
					n, err = unix.Pwrite(fd, buf[off:off+zramIO], int64(off))
				} else {
					n, err = unix.Pread(fd, buf[off:off+zramIO], int64(off))
				}
				if err == nil && n != zramIO {
					err = fmt.Errorf("short I/O: %d bytes", n)
				}
				if err != nil {
					errs[c] = fmt.Errorf("--vs-zram: %s at %d: %w", dev, off, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}
