package region

import (
	"encoding/binary"
	"fmt"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The userfaultfd ABI (include/uapi/linux/userfaultfd.h). golang.org/x/sys
// has none of it, so the numbers are computed here from the header's
// _IOR/_IOWR definitions: direction in bits 30-31, argument size in bits
// 16-29, type 0xAA in bits 8-15, number in bits 0-7.
const (
	uffdAPI = 0xAA

	iocWrite = 1
	iocRead  = 2
)

func ioc(dir, nr, size uintptr) uintptr { return dir<<30 | size<<16 | 0xAA<<8 | nr }

var (
	ioAPI          = ioc(iocRead|iocWrite, 0x3F, 24) // struct uffdio_api
	ioRegister     = ioc(iocRead|iocWrite, 0x00, 32) // struct uffdio_register
	ioUnregister   = ioc(iocRead, 0x01, 16)          // struct uffdio_range
	ioWake         = ioc(iocRead, 0x02, 16)          // struct uffdio_range
	ioCopy         = ioc(iocRead|iocWrite, 0x03, 40) // struct uffdio_copy
	ioZeropage     = ioc(iocRead|iocWrite, 0x04, 32) // struct uffdio_zeropage
	ioWriteProtect = ioc(iocRead|iocWrite, 0x06, 24) // struct uffdio_writeprotect
)

// Features, register modes and fault flags used here.
const (
	featPagefaultFlagWP = 1 << 0
	featMissingShmem    = 1 << 5
	featWPShmem         = 1 << 12 // UFFD_FEATURE_WP_HUGETLBFS_SHMEM

	modeMissing = 1 << 0
	modeWP      = 1 << 1

	eventPagefault = 0x12

	flagWrite = 1 << 0
	flagWP    = 1 << 1

	copyModeWP   = 1 << 1 // UFFDIO_COPY_MODE_WP
	wpModeWP     = 1 << 0 // UFFDIO_WRITEPROTECT_MODE_WP
	msgSize      = 32     // struct uffd_msg
	wantFeatures = featPagefaultFlagWP | featMissingShmem | featWPShmem

	// The range ioctls a registration must offer.
	needIoctls = 1<<0x02 | 1<<0x03 | 1<<0x04 | 1<<0x06
)

// uffd is a userfaultfd of another process (or of this one, in tests):
// every ioctl acts on the memory of the process that created it.
type uffd int

func (u uffd) ioctl(req uintptr, arg unsafe.Pointer) error {
	for {
		_, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(u), req, uintptr(arg))
		if e == unix.EINTR {
			continue
		}
		if e != 0 {
			return e
		}
		return nil
	}
}

// handshake does UFFDIO_API with the features regions need, unless the
// creator did it already (the kernel then answers EINVAL, and register
// below proves the features by what it allows).
func (u uffd) handshake() error {
	var api [3]uint64 // api, features, ioctls
	api[0], api[1] = uffdAPI, wantFeatures
	err := u.ioctl(ioAPI, unsafe.Pointer(&api))
	if err == nil || err == unix.EINVAL {
		return nil
	}
	return fmt.Errorf("UFFDIO_API: %v", err)
}

// register registers [start, start+length) for missing and write-protect
// faults. Registering a range again with the same userfaultfd is allowed,
// so a range the client registered already is simply confirmed.
func (u uffd) register(start, length uint64) error {
	var r [4]uint64 // range.start, range.len, mode, ioctls
	r[0], r[1], r[2] = start, length, modeMissing|modeWP
	if err := u.ioctl(ioRegister, unsafe.Pointer(&r)); err != nil {
		return fmt.Errorf("UFFDIO_REGISTER (missing and write-protect) of %#x+%d: %v", start, length, err)
	}
	if r[3]&needIoctls != needIoctls {
		return fmt.Errorf("UFFDIO_REGISTER offers ioctls %#x, want copy, zeropage, wake and write-protect", r[3])
	}
	return nil
}

func (u uffd) unregister(start, length uint64) error {
	r := [2]uint64{start, length}
	return u.ioctl(ioUnregister, unsafe.Pointer(&r))
}

func (u uffd) wake(start, length uint64) error {
	r := [2]uint64{start, length}
	return u.ioctl(ioWake, unsafe.Pointer(&r))
}

// copyIn places length bytes from src at dst in the faulting process and
// wakes the threads waiting there. It returns the bytes copied; EEXIST
// means a page is already there.
func (u uffd) copyIn(dst uint64, src []byte, wp bool) (int64, error) {
	var c struct {
		dst, src, len, mode uint64
		copied              int64
	}
	c.dst, c.src, c.len = dst, uint64(uintptr(unsafe.Pointer(&src[0]))), uint64(len(src))
	if wp {
		c.mode = copyModeWP
	}
	err := u.ioctl(ioCopy, unsafe.Pointer(&c))
	return c.copied, err
}

// zero places zero pages at [dst, dst+length) and wakes the waiters.
func (u uffd) zero(dst, length uint64) (int64, error) {
	var z struct {
		start, len, mode uint64
		zeroed           int64
	}
	z.start, z.len = dst, length
	err := u.ioctl(ioZeropage, unsafe.Pointer(&z))
	return z.zeroed, err
}

// protect write-protects [start, start+length) (or lifts the protection,
// which wakes the threads waiting on it).
func (u uffd) protect(start, length uint64, on bool) error {
	w := [3]uint64{start, length, 0}
	if on {
		w[2] = wpModeWP
	}
	return u.ioctl(ioWriteProtect, unsafe.Pointer(&w))
}

// fault is one page-fault message.
type fault struct {
	flags, addr uint64
}

// parseFaults appends the page faults among the messages in b; other
// events (none are asked for) are skipped.
func parseFaults(b []byte, out []fault) []fault {
	for ; len(b) >= msgSize; b = b[msgSize:] {
		if b[0] != eventPagefault {
			continue
		}
		out = append(out, fault{flags: binary.NativeEndian.Uint64(b[8:]), addr: binary.NativeEndian.Uint64(b[16:])})
	}
	return out
}

// isUffd says whether fd is a userfaultfd: the kernel names its anonymous
// inode so, and nothing else tells one apart from any descriptor.
func isUffd(fd int) bool {
	name, err := os.Readlink(fmt.Sprintf("/proc/self/fd/%d", fd))
	return err == nil && name == "anon_inode:[userfaultfd]"
}
