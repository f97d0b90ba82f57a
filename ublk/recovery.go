package ublk

import (
	"errors"
	"fmt"
	"time"

	"golang.org/x/sys/unix"
)

// A device made with Options.Recovery stays when its server ends, planned
// or not: the kernel notices the server gone (its monitor runs every few
// seconds in 6.x), quiesces the device and holds its I/O, and Recover in
// a new process takes it over: START_USER_RECOVERY, a fetch on every tag
// of every queue, END_USER_RECOVERY. The kernel then sends the waiting
// requests and those in flight at the death again (REISSUE). Processes
// swapping on the device wait meanwhile; nothing fails.

// ErrNoDevice is Recover's answer for a device the kernel no longer has.
var ErrNoDevice = errors.New("no such ublk device")

// recoverWait bounds how long Recover waits for the kernel to see the old
// server gone and quiesce the device.
const recoverWait = 30 * time.Second

// Recover serves device id, left by a server that ended, from
// opts.Server. opts gives what Create was given (Size is checked against
// the device's own).
func Recover(id uint32, opts Options) (*Device, error) {
	if err := opts.fill(); err != nil {
		return nil, err
	}
	ctrl, err := OpenControl()
	if err != nil {
		return nil, err
	}
	info, err := waitQuiesced(ctrl, id, time.Now().Add(recoverWait))
	if err != nil {
		ctrl.Close()
		return nil, err
	}
	p, err := ctrl.getParams(id)
	if err != nil {
		ctrl.Close()
		return nil, err
	}
	if got := p.Basic.DevSectors << sectorShift; got != opts.Size {
		ctrl.Close()
		return nil, fmt.Errorf("ublk device %d has %d bytes, not the %d recorded: not taken over", id, got, opts.Size)
	}
	opts.Queues, opts.Depth = int(info.NrHwQueues), int(info.QueueDepth)
	opts.MaxIO = int(p.Basic.MaxSectors<<sectorShift) &^ (opts.BlockSize - 1)
	d := &Device{ID: id, opts: opts, ctrl: ctrl, cdev: -1, done: make(chan struct{})}
	if err := retryBusy(func() error { return ctrl.startRecovery(id) }, time.Now().Add(recoverWait)); err != nil {
		ctrl.Close()
		return nil, err
	}
	if err := d.serveNative(); err != nil {
		// Left quiesced for another try: removing it would fail every
		// process with pages on it.
		ctrl.Close()
		return nil, err
	}
	if err := ctrl.endRecovery(id); err != nil {
		return nil, err
	}
	return d, nil
}

// waitQuiesced waits until the kernel has quiesced device id after its
// server's end, and refuses a device made without recovery or still
// served by a live process.
func waitQuiesced(ctrl *Control, id uint32, deadline time.Time) (DevInfo, error) {
	for {
		info, err := ctrl.DevInfo(id)
		switch {
		case errors.Is(err, unix.ENODEV):
			return info, fmt.Errorf("%w: %d", ErrNoDevice, id)
		case err != nil:
			return info, err
		case info.Flags&flagUserRecovery == 0:
			return info, fmt.Errorf("ublk device %d was made without user recovery: it cannot be taken over", id)
		case info.State == StateQuiesced:
			return info, nil
		case info.State == StateLive && info.ServerPID > 0 && unix.Kill(int(info.ServerPID), 0) == nil:
			return info, fmt.Errorf("ublk device %d is served by process %d", id, info.ServerPID)
		}
		if time.Now().After(deadline) {
			return info, fmt.Errorf("ublk device %d not quiesced after %v (state %d)", id, recoverWait, info.State)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// retryBusy runs f until it does not fail with EBUSY (the kernel is still
// tearing the old server's queues down) or the deadline passes.
func retryBusy(f func() error, deadline time.Time) error {
	for {
		err := f()
		if !errors.Is(err, unix.EBUSY) || time.Now().After(deadline) {
			return err
		}
		time.Sleep(100 * time.Millisecond)
	}
}
