// Package ublk serves a block device from user space through the kernel's
// ublk driver (Linux 6.0+, CONFIG_BLK_DEV_UBLK): the device's 4 KiB blocks
// are pages of a Store, so swap on it lands in an s4d pool.
//
// The driver is driven through io_uring URING_CMD: control commands on
// /dev/ublk-control (ADD_DEV, SET_PARAMS, START_DEV, STOP_DEV, DEL_DEV,
// GET_DEV_INFO) and, per hardware queue, FETCH_REQ / COMMIT_AND_FETCH_REQ
// on /dev/ublkcN with the request descriptors read from its mmap. Each
// queue is one goroutine locked to its OS thread with its own ring; the
// requests one ring wait returns are served as one batch (batch.go), so
// the engine behind the store gets as many pages at once as the kernel
// had in flight. With Options.Native the queues are C threads of package
// swapio instead (native.go): no Go on the I/O path; this package keeps the
// control commands.
//
// io_uring is used through raw syscalls (golang.org/x/sys/unix): the Go
// io_uring and ublk modules are refused by our module proxy, and
// Debian's liburing through cgo would tie the binary to a library (and
// cgo calls) on the one path that must not allocate or block under memory
// pressure, for the few dozen lines of ring handling a ublk server needs
// (uring.go). The layouts follow include/uapi/linux/ublk_cmd.h (uapi.go);
// ublksrv and rublk were read for the protocol.
package ublk
