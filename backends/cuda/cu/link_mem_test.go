package cu

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// hostAlloc gives n bytes of host memory the copy engines can reach and
// what frees it.
type hostAlloc func(d *Driver, n int) ([]byte, func(), error)

func pinnedHost(d *Driver, n int) ([]byte, func(), error) {
	b, err := d.HostAlloc(n)
	if err != nil {
		return nil, nil, err
	}
	return b, func() { d.HostFree(b) }, nil
}

// registeredHost maps memory as a client or the store does (anonymous, or
// a memfd's pages shared), optionally asking for transparent huge pages,
// faults it in and registers it with the GPU, as the engine registers a
// client's memfd: the copy engines then walk the mapping's pages, and
// how large those are may be what separates registered memory from
// HostAlloc's.
func registeredHost(memfd, huge bool) hostAlloc {
	return func(d *Driver, n int) ([]byte, func(), error) {
		// Huge pages need the address (and a file's offset) 2 MiB-aligned:
		// reserve more, then map at an aligned address inside.
		const align = 2 << 20
		raw, err := unix.Mmap(-1, 0, n+align, unix.PROT_NONE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
		if err != nil {
			return nil, nil, err
		}
		at := unsafe.Pointer(&raw[(align-int(uintptr(unsafe.Pointer(&raw[0]))%align))%align])
		fd, flags := -1, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS
		if memfd {
			if fd, err = unix.MemfdCreate("s4d-link", unix.MFD_CLOEXEC); err == nil {
				err = unix.Ftruncate(fd, int64(n))
			}
			flags = unix.MAP_SHARED
		}
		if err == nil {
			_, err = unix.MmapPtr(fd, 0, at, uintptr(n), unix.PROT_READ|unix.PROT_WRITE, flags|unix.MAP_FIXED)
		}
		if fd >= 0 {
			unix.Close(fd)
		}
		if err != nil {
			unix.Munmap(raw)
			return nil, nil, err
		}
		b := unsafe.Slice((*byte)(at), n)
		if huge {
			if err := unix.Madvise(b, unix.MADV_HUGEPAGE); err != nil {
				unix.Munmap(raw)
				return nil, nil, fmt.Errorf("madvise(MADV_HUGEPAGE): %w", err)
			}
		}
		for i := 0; i < n; i += 4096 {
			b[i] = 1
		}
		if err := d.HostRegister(b); err != nil {
			unix.Munmap(raw)
			return nil, nil, err
		}
		return b, func() { d.HostUnregister(b); unix.Munmap(raw) }, nil
	}
}

// hugeBytes is how much of the mapping holding b is in huge pages
// (/proc/self/smaps: AnonHugePages, ShmemPmdMapped).
func hugeBytes(b []byte) int64 {
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		return -1
	}
	defer f.Close()
	addr := uint64(uintptr(unsafe.Pointer(&b[0])))
	in := false
	var kb int64
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if lo, rest, ok := strings.Cut(line, "-"); ok && !strings.Contains(lo, ":") {
			start, err1 := strconv.ParseUint(lo, 16, 64)
			end, err2 := strconv.ParseUint(strings.Fields(rest)[0], 16, 64)
			in = err1 == nil && err2 == nil && start <= addr && addr < end
			continue
		}
		if !in {
			continue
		}
		if k, v, ok := strings.Cut(line, ":"); ok && (k == "AnonHugePages" || k == "ShmemPmdMapped") {
			if n, err := strconv.ParseInt(strings.Fields(v)[0], 10, 64); err == nil {
				kb += n
			}
		}
	}
	return kb << 10
}

// BenchmarkLinkMemory is BenchmarkLink on the first GPU for each kind of
// host memory the engine copies from and to: its own pinned buffers, and
// registered mappings like a client's memfd or the store's slabs, in 4 KiB
// pages or transparent huge ones (shmem's need
// /sys/kernel/mm/transparent_hugepage/shmem_enabled at advise or always;
// the huge-MiB metric says what the kernel gave).
//
//	go test -run '^$' -bench LinkMemory -benchtime 4x ./backends/cuda/cu
func BenchmarkLinkMemory(b *testing.B) {
	d, _ := benchDriver(b)
	kinds := []struct {
		name  string
		alloc hostAlloc
	}{
		{"pinned", pinnedHost},
		{"anon-4k", registeredHost(false, false)},
		{"anon-thp", registeredHost(false, true)},
		{"memfd-4k", registeredHost(true, false)},
		{"memfd-thp", registeredHost(true, true)},
	}
	// 4 MiB copies are the engine's order of size (pieces of a batch),
	// 64 MiB the link's best case.
	for _, chunk := range []int{4 << 20, 16 << 20, 64 << 20} {
		for _, k := range kinds {
			// What the kernel gives for the kind, measured on a mapping
			// of the benchmark's size before the runs.
			huge := int64(-1)
			if k.name != "pinned" {
				if m, free, err := k.alloc(d, 2*chunk); err == nil {
					huge = hugeBytes(m)
					free()
				}
			}
			for _, dir := range []string{"htod", "dtoh"} {
				b.Run(fmt.Sprintf("chunk=%dM/%s/%s", chunk>>20, k.name, dir), func(b *testing.B) {
					moved := linkRun(b, d, 1, dir, chunk, b.N, k.alloc)
					b.ReportMetric(float64(moved)/b.Elapsed().Seconds()/1e9, "GB/s")
					b.ReportMetric(float64(huge)/(1<<20), "huge-MiB")
					b.ReportMetric(0, "ns/op")
				})
			}
		}
	}
}
