// Package ublk is the control plane of a block device served from user
// space through the kernel's ublk driver (Linux 6.0+, CONFIG_BLK_DEV_UBLK):
// add, parameters, start, stop, delete and user recovery, as io_uring
// URING_CMDs on /dev/ublk-control (uring.go, ctrl.go). The device's 4 KiB
// blocks are served by C threads of package swapio, one per hardware
// queue, each pinned to the CPUs whose requests its queue takes and with
// its own ring, from a store in C (Options.Server): no Go on the I/O path
// (native.go maps each queue's request descriptors for its thread).
//
// io_uring is used through raw syscalls (golang.org/x/sys/unix): the Go
// io_uring and ublk modules are refused by our module proxy, and
// Debian's liburing would be a library for the few dozen lines of ring
// handling the control commands need. The layouts follow
// include/uapi/linux/ublk_cmd.h (uapi.go); ublksrv and rublk were read for
// the protocol.
package ublk
