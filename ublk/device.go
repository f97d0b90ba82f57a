package ublk

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"runtime"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/s4d-project/s4d/swapio"
)

// Options describe a device to create.
type Options struct {
	Size      uint64 // bytes; rounded down to whole blocks
	BlockSize int    // logical and physical block size: 4096 (a page; the only size served)
	Queues    int    // hardware queues, each served by its own C thread; 0 = one per CPU
	Depth     int    // requests in flight per queue; 0 = 64
	MaxIO     int    // largest I/O in bytes; 0 = 128 KiB
	// Recovery makes the device outlive its server: when the process
	// ends, its I/O waits (quiesced) until Recover in a new one takes it
	// over, and requests in flight then are sent again (recovery.go).
	Recovery bool
	Log      *slog.Logger
	// Server is the store in C the queue threads serve from (native.go).
	Server swapio.Server
}

// Limits on what Options may ask.
const (
	MaxQueues = 64
	MaxDepth  = 1024
	MinMaxIO  = 4096
	MaxMaxIO  = 1 << 20
)

func (o *Options) fill() error {
	if o.BlockSize == 0 {
		o.BlockSize = 4096
	}
	if o.BlockSize != 4096 {
		return fmt.Errorf("block size %d: only 4096 is served (a block is a page of the store)", o.BlockSize)
	}
	if o.Queues == 0 {
		o.Queues = min(runtime.NumCPU(), MaxQueues)
	}
	if o.Depth == 0 {
		o.Depth = 64
	}
	if o.MaxIO == 0 {
		o.MaxIO = 128 << 10
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	switch {
	case o.Server == nil:
		return errors.New("no store to serve the device from")
	case o.Queues < 1 || o.Queues > MaxQueues:
		return fmt.Errorf("queues %d: want 1-%d", o.Queues, MaxQueues)
	case o.Depth < 1 || o.Depth > MaxDepth:
		return fmt.Errorf("queue depth %d: want 1-%d", o.Depth, MaxDepth)
	case o.MaxIO < MinMaxIO || o.MaxIO > MaxMaxIO || o.MaxIO%o.BlockSize != 0:
		return fmt.Errorf("largest I/O %d bytes: want a multiple of %d from %d to %d", o.MaxIO, o.BlockSize, MinMaxIO, MaxMaxIO)
	case o.Size < uint64(o.BlockSize):
		return fmt.Errorf("size %d bytes: want at least one block of %d", o.Size, o.BlockSize)
	}
	o.Size -= o.Size % uint64(o.BlockSize)
	return nil
}

// Device is a ublk block device served from a store in C (Options.Server).
type Device struct {
	ID   uint32
	opts Options
	ctrl *Control
	cdev int

	done   chan struct{} // closed when every queue has stopped
	mu     sync.Mutex
	qerr   error // the first queue's failure
	closed bool
	native *nativeQueues
}

// Create adds a device, starts a thread per queue and makes /dev/ublkbN
// appear. Whatever fails undoes what was done.
func Create(opts Options) (*Device, error) {
	if err := opts.fill(); err != nil {
		return nil, err
	}
	ctrl, err := OpenControl()
	if err != nil {
		return nil, err
	}
	flags := uint64(flagCmdIoctlEncode)
	if opts.Recovery {
		flags |= flagUserRecovery | flagUserRecoveryReissue
	}
	info, err := ctrl.AddDev(DevInfo{NrHwQueues: uint16(opts.Queues), QueueDepth: uint16(opts.Depth),
		MaxIOBufBytes: uint32(opts.MaxIO), DevID: ^uint32(0), Flags: flags})
	if err != nil {
		ctrl.Close()
		return nil, err
	}
	// The kernel may give fewer queues (at most one per CPU) or a
	// shallower depth than asked.
	opts.Queues, opts.Depth = int(info.NrHwQueues), int(info.QueueDepth)
	d := &Device{ID: info.DevID, opts: opts, ctrl: ctrl, cdev: -1, done: make(chan struct{})}
	if err := d.start(info); err != nil {
		d.remove()
		return nil, err
	}
	return d, nil
}

// BlockPath is the block device the kernel serves from this device.
func (d *Device) BlockPath() string { return fmt.Sprintf("/dev/ublkb%d", d.ID) }

// CharPath is the server's side of it.
func (d *Device) CharPath() string { return fmt.Sprintf("/dev/ublkc%d", d.ID) }

// Size is the device's size in bytes.
func (d *Device) Size() uint64 { return d.opts.Size }

// Queues is how many queues (threads) serve it.
func (d *Device) Queues() int { return d.opts.Queues }

// Depth is how many requests each queue has in flight at most.
func (d *Device) Depth() int { return d.opts.Depth }

// BufferBytes is the memory its queues hold for I/O: a buffer per tag.
func (d *Device) BufferBytes() uint64 { return uint64(d.opts.Queues * d.opts.Depth * d.opts.MaxIO) }

func (d *Device) start(info DevInfo) error {
	o := d.opts
	if int(info.MaxIOBufBytes) < o.MaxIO {
		o.MaxIO = int(info.MaxIOBufBytes) &^ (o.BlockSize - 1) // the kernel may lower it
		d.opts.MaxIO = o.MaxIO
	}
	p := &params{Types: paramBasic | paramDiscard}
	p.Basic = paramBasicT{LogicalBSShift: 12, PhysicalBSShift: 12, IOOptShift: 12, IOMinShift: 12,
		MaxSectors: uint32(o.MaxIO >> sectorShift), DevSectors: o.Size >> sectorShift}
	// Discards free the pages (swap discards the slots it frees); one
	// segment is all the kernel allows a ublk server.
	p.Discard = paramDiscardT{DiscardGranularity: uint32(o.BlockSize), MaxDiscardSectors: 1 << 21,
		MaxWriteZeroesSectors: 1 << 21, MaxDiscardSegments: 1}
	if err := d.ctrl.setParams(d.ID, p); err != nil {
		return err
	}
	if err := d.serveNative(); err != nil {
		return err
	}
	if err := d.ctrl.StartDev(d.ID); err != nil {
		return err
	}
	d.unthrottle()
	return nil
}

// unthrottle turns the block layer's writeback throttling off for the
// device. It caps the writes in flight when reads take long, and takes
// this server's own service time (slow under memory pressure) for
// congestion: every task that reclaims then waits in wbt_wait for writes
// only this server finishes. Seen in the guest at 2 CPUs: kswapd, kernel
// workers and every reclaiming process in wbt_wait while the swap device
// served nothing. zram, a bio device, is never throttled so.
func (d *Device) unthrottle() {
	path := fmt.Sprintf("/sys/block/ublkb%d/queue/wbt_lat_usec", d.ID)
	if err := os.WriteFile(path, []byte("0"), 0); err != nil && !errors.Is(err, fs.ErrNotExist) {
		d.opts.Log.Warn("writeback throttling left on", "device", d.BlockPath(), "err", err)
	}
}

// Detach stops serving without removing the device: once a batch being
// served is answered, the queues answer nothing more, and what the kernel
// sends after waits. For a device made with Recovery, the process then
// exits and the next one takes the device over (Recover), the requests
// left waiting included; the store must not change after Detach.
func (d *Device) Detach() {
	d.mu.Lock()
	d.closed = true
	d.mu.Unlock()
	if d.native != nil {
		d.native.detach()
	}
}

// openWait opens a device node that devtmpfs or udev creates shortly
// after the kernel adds the device.
func openWait(path string, limit time.Duration) (int, error) {
	deadline := time.Now().Add(limit)
	for {
		fd, err := unix.Open(path, unix.O_RDWR|unix.O_CLOEXEC, 0)
		if err == nil {
			return fd, nil
		}
		if err != unix.ENOENT || time.Now().After(deadline) {
			return -1, fmt.Errorf("open %s: %w", path, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Err is why a queue stopped serving, if one did.
func (d *Device) Err() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.qerr
}

// Close stops the device (the block device goes away; I/O still queued
// fails), waits for its queues and deletes it.
func (d *Device) Close() error {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return nil
	}
	d.closed = true
	d.mu.Unlock()
	return d.remove()
}

func (d *Device) remove() error {
	var errs []error
	if err := d.ctrl.StopDev(d.ID); err != nil {
		errs = append(errs, err)
	}
	if d.cdev >= 0 {
		select {
		case <-d.done:
		case <-time.After(10 * time.Second):
			// The queues' threads still hold the rings; DEL_DEV would wait
			// for them forever.
			errs = append(errs, fmt.Errorf("%s: queues did not stop after STOP_DEV; device left in place", d.BlockPath()))
			return errors.Join(errs...)
		}
		if d.native != nil {
			d.native.release()
		}
		unix.Close(d.cdev)
		d.cdev = -1
	}
	if err := d.ctrl.DelDev(d.ID); err != nil {
		errs = append(errs, err)
	}
	d.ctrl.Close()
	return errors.Join(errs...)
}

// Exists says whether a device node is present (for tests and listings).
func Exists(path string) bool { _, err := os.Stat(path); return err == nil }
