package daemon

import (
	"bufio"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"strings"

	"golang.org/x/sys/unix"
)

// The daemon's own memory while it serves swap (guardMemory): locked,
// present, and the Go heap grown up front.

// lockAll locks the daemon's memory: every page of every mapping made
// from now on present and locked (MCL_FUTURE populates each new mapping
// whole), and of the current ones every page present now or touched
// later, with the writable ones faulted in now — all but the program's
// zero-initialised data: the Go runtime's heap index there is 32 MiB of
// which it touches a few pages. S4D_SWAP_LOCK=onfault locks pages only as
// they are touched (less memory; in the guest, first touches under
// pressure stalled the I/O path), =all populates everything.
func lockAll() error {
	switch os.Getenv("S4D_SWAP_LOCK") {
	case "onfault":
		return unix.Mlockall(unix.MCL_CURRENT | unix.MCL_FUTURE | unix.MCL_ONFAULT)
	case "all":
		return unix.Mlockall(unix.MCL_CURRENT | unix.MCL_FUTURE)
	}
	if err := unix.Mlockall(unix.MCL_CURRENT | unix.MCL_ONFAULT); err != nil {
		return err
	}
	// MCL_FUTURE alone leaves the current mappings as they are.
	if err := unix.Mlockall(unix.MCL_FUTURE); err != nil {
		return err
	}
	return populateAnon()
}

// populateAnon faults in the writable anonymous mappings, but the one
// right after the executable's (its zero-initialised data and brk).
func populateAnon() error {
	exe, _ := os.Executable()
	f, err := os.Open("/proc/self/maps")
	if err != nil {
		return err
	}
	defer f.Close()
	var exeEnd uintptr
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		var lo, hi uintptr
		if len(fs) < 5 || !strings.HasPrefix(fs[1], "rw") {
			if len(fs) >= 6 && fs[5] == exe {
				fmt.Sscanf(fs[0], "%x-%x", &lo, &exeEnd)
			}
			continue
		}
		if _, err := fmt.Sscanf(fs[0], "%x-%x", &lo, &hi); err != nil || hi <= lo {
			continue
		}
		if len(fs) >= 6 {
			if fs[5] == exe {
				exeEnd = hi
			}
			continue // files: lockFiles; [stack], [vdso] and the like
		}
		if lo == exeEnd {
			continue
		}
		unix.Syscall(unix.SYS_MADVISE, lo, hi-lo, 23) // MADV_POPULATE_WRITE; a PROT_NONE range fails, as it should
	}
	return sc.Err()
}

// lockFiles locks and faults in every file the daemon maps (its code and
// libraries): ONFAULT leaves a page of code not run yet to a later fault,
// and where the binary lies on tmpfs (an initramfs) that page can be on
// swap, on the very device the fault would have to wait for.
func lockFiles() (uint64, error) {
	f, err := os.Open("/proc/self/maps")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	var total uint64
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// start-end perms offset dev inode path
		fs := strings.Fields(sc.Text())
		if len(fs) < 6 || fs[4] == "0" || !strings.HasPrefix(fs[5], "/") || !strings.ContainsAny(fs[1], "rx") {
			continue
		}
		var lo, hi uintptr
		if _, err := fmt.Sscanf(fs[0], "%x-%x", &lo, &hi); err != nil || hi <= lo {
			continue
		}
		if _, _, e := unix.Syscall(unix.SYS_MLOCK, lo, hi-lo, 0); e != 0 {
			return total, fmt.Errorf("mlock %s: %w", fs[5], e)
		}
		total += uint64(hi - lo)
	}
	return total, sc.Err()
}

// growHeap grows the Go heap to three quarters of its bound (limit) now,
// at the first swap device, and returns the heap's size after. The
// runtime grows the heap by mapping memory, and with the daemon's memory
// locked (MCL_FUTURE) a new mapping is filled at once: on a swap device's
// I/O path, with no memory free, that filling waits in direct reclaim,
// which the device's own server cannot swap its way out of (seen in the
// guest: the queue thread in mmap -> __mm_populate -> reclaim). Grown
// now, the heap's pages stay mapped and present: they are locked, so the
// runtime's scavenger cannot hand them back (madvise refuses locked
// pages), and the collector keeps the heap within the bound, so while the
// live heap stays under it no new mapping is needed.
//
// The heap is grown in objects of a page each, the smallest spans, and
// collected twice before it is let go: the runtime's metadata for spans
// (their structures, the sets that list them, their mark bits, allocated
// apart from the heap in chunks it maps as it needs them) grows now to
// what a heap of that size in the most spans needs, and is reused after.
// Grown in large objects, the heap had few spans, and the queue thread
// mapped a 256 KiB chunk of span metadata (runtime.persistentalloc)
// while it held the store's lock: at two CPUs in the guest, both queues
// then stalled for good.
func growHeap(limit int64) uint64 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	target := uint64(limit) * 3 / 4
	const span = 8 << 10 // the runtime's page: one object per span
	var ballast [][]byte
	for have := ms.HeapSys; have < target; have += span {
		ballast = append(ballast, make([]byte, span))
	}
	runtime.GC()
	runtime.GC()
	runtime.KeepAlive(ballast)
	ballast = nil
	debug.FreeOSMemory() // a collection now: the ballast becomes free heap
	runtime.ReadMemStats(&ms)
	return ms.HeapSys
}
