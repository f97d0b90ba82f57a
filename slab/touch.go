package slab

/*
#include <stddef.h>

// s4d_touch writes a byte of every page: each first write is a page fault
// taken in user mode.
static void s4d_touch(char *p, size_t n, size_t step) {
	for (size_t i = 0; i < n; i += step)
		((volatile char *)p)[i] = 0;
}
*/
import "C"

import (
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

const mlockOnFault = 1 // MLOCK_ONFAULT

// lockOnFault locks b's pages as they are faulted in (mlock2
// MLOCK_ONFAULT), populating nothing now.
func lockOnFault(b []byte) error {
	if len(b) == 0 {
		return nil
	}
	if _, _, e := unix.Syscall(unix.SYS_MLOCK2, uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)), mlockOnFault); e != 0 {
		return e
	}
	return nil
}

// Present faults in every page of b (mapped memory, not the Go heap;
// locked on fault, if it is to be locked: lockOnFault), without holding
// the process's mmap lock while memory is found for them. A daemon
// serving swap finds that memory in reclaim, which writes pages out to
// its own devices and may wait for them; its queue threads must meanwhile
// be free to take the mmap lock (the Go runtime maps memory on any
// thread). Seen in the guest with two CPUs: a refill's mmap, populating
// under the lock (MCL_FUTURE), waited in reclaim for the swap device
// while that device's queue thread waited for the lock in the runtime's
// mmap. So the range is locked on fault and its pages are faulted in by
// user-mode writes, which the kernel serves under the range's own VMA lock. The
// writes run in C: a Go goroutine stuck in a fault would hold up the
// runtime's stop-the-world phases, and with them the queue goroutines; a
// cgo call is a system call to the scheduler.
func Present(b []byte) {
	if len(b) == 0 {
		return
	}
	C.s4d_touch((*C.char)(unsafe.Pointer(&b[0])), C.size_t(len(b)), C.size_t(os.Getpagesize()))
}
