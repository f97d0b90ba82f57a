package ublk

import (
	"os"
	"runtime"

	"golang.org/x/sys/unix"
)

const (
	prSetIOFlusher = 57 // PR_SET_IO_FLUSHER (needs CAP_SYS_RESOURCE)
	prGetIOFlusher = 58
	flusherEnv     = "S4D_IO_FLUSHER_EXEC" // set by the re-exec, so it happens once
)

// IsFlusher says whether the calling thread is marked an I/O flusher.
func IsFlusher() bool {
	v, err := unix.PrctlRetInt(prGetIOFlusher, 0, 0, 0, 0)
	return err == nil && v == 1
}

// ExecAsFlusher makes every thread of the process an I/O flusher, where
// this machine can serve swap (the ublk control device exists) and the
// process may (CAP_SYS_RESOURCE); otherwise it does nothing.
//
// Marking the queue threads is not enough: a swap-out they serve is
// compressed and stored by other threads (the engines' workers, the Go
// runtime growing the heap), and one of those entering direct reclaim
// would submit swap I/O to this very device and wait for a free tag
// while the queue waits for it. The mark is per thread, inherited by
// clone and kept across execve, and Go starts threads before main: so
// the process marks its one thread and executes itself again, and every
// thread the new image ever has descends from a marked one. Under a
// socket activation the PID, and so LISTEN_PID, stays the same.
//
// It returns only if it did not exec.
func ExecAsFlusher() error {
	if _, err := os.Stat(ControlPath); err != nil || os.Getenv(flusherEnv) != "" || IsFlusher() {
		return nil
	}
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	// The mark and the exec on the same thread: it is the thread that
	// becomes the new image.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := unix.Prctl(prSetIOFlusher, 1, 0, 0, 0); err != nil {
		return err
	}
	err = unix.Exec(exe, os.Args, append(os.Environ(), flusherEnv+"=1"))
	unix.Prctl(prSetIOFlusher, 0, 0, 0, 0)
	return err
}
