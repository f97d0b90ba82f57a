package ublk

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ControlPath is the ublk driver's control device.
const ControlPath = "/dev/ublk-control"

// ErrUnavailable wraps every reason this machine cannot serve a ublk
// device; its message carries the remedy.
var ErrUnavailable = errors.New("ublk is not available")

// Available says whether a ublk device can be created here, and if not why
// and what to do about it.
func Available() error {
	c, err := OpenControl()
	if err != nil {
		return err
	}
	c.Close()
	return nil
}

// Control is the open control device. Its commands run one at a time.
type Control struct {
	mu   sync.Mutex
	fd   int
	ring *ring
	// page holds what a command's addr points at: outside the Go heap,
	// as the kernel reads or writes it while the command runs (possibly on
	// an io-wq worker) and Go may move stacks.
	page []byte
}

// OpenControl opens /dev/ublk-control, or says why it cannot.
func OpenControl() (*Control, error) {
	fd, err := unix.Open(ControlPath, unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, explainOpen(err)
	}
	r, err := newRing(4)
	if err != nil {
		unix.Close(fd)
		if errors.Is(err, ErrNoUring) {
			return nil, fmt.Errorf("%w: %v (allow io_uring: sysctl kernel.io_uring_disabled=0, and no seccomp filter denying it)", ErrUnavailable, err)
		}
		return nil, err
	}
	page, err := unix.Mmap(-1, 0, os.Getpagesize(), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		r.close()
		unix.Close(fd)
		return nil, fmt.Errorf("mmap: %w", err)
	}
	return &Control{fd: fd, ring: r, page: page}, nil
}

func explainOpen(err error) error {
	switch {
	case errors.Is(err, unix.ENOENT):
		if _, serr := os.Stat("/sys/module/ublk_drv"); serr == nil {
			return fmt.Errorf("%w: %s is missing though ublk_drv is loaded (mount devtmpfs on /dev, or run udev)", ErrUnavailable, ControlPath)
		}
		return fmt.Errorf("%w: %s is missing: this kernel has no ublk driver loaded (run `modprobe ublk_drv`; the kernel needs CONFIG_BLK_DEV_UBLK, Linux 6.0 or later; use zram where it has none)", ErrUnavailable, ControlPath)
	case errors.Is(err, unix.EACCES), errors.Is(err, unix.EPERM):
		return fmt.Errorf("%w: %s: %v (the daemon needs root, or CAP_SYS_ADMIN: see systemd/s4d-swap.conf)", ErrUnavailable, ControlPath, err)
	}
	return fmt.Errorf("%w: open %s: %v", ErrUnavailable, ControlPath, err)
}

// Close closes the control device.
func (c *Control) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ring != nil {
		c.ring.close()
		c.ring = nil
		unix.Munmap(c.page)
	}
	return unix.Close(c.fd)
}

var ctrlNames = map[uint32]string{cmdGetQueueAffinity: "GET_QUEUE_AFFINITY", cmdGetDevInfo: "GET_DEV_INFO", cmdAddDev: "ADD_DEV", cmdDelDev: "DEL_DEV",
	cmdStartDev: "START_DEV", cmdStopDev: "STOP_DEV", cmdSetParams: "SET_PARAMS", cmdGetParams: "GET_PARAMS",
	cmdStartUserRecovery: "START_USER_RECOVERY", cmdEndUserRecovery: "END_USER_RECOVERY"}

// run issues one control command and waits for its result. The n bytes
// at buf, when buf is not nil, go to the kernel in c.page and come back
// from it.
func (c *Control) run(nr uint32, dev uint32, data uint64, buf unsafe.Pointer, n int) (int32, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ring == nil {
		return 0, errors.New("ublk control device closed")
	}
	cc := ctrlCmd{DevID: dev, QueueID: 0xffff, Data: data}
	if buf != nil {
		copy(c.page, unsafe.Slice((*byte)(buf), n))
		cc.Addr, cc.Len = uint64(uintptr(unsafe.Pointer(&c.page[0]))), uint16(n)
	}
	sqe := c.ring.next()
	prepCmd(sqe, c.fd, ctrlOp(nr), cc.bytes(), uint64(nr))
	var res int32
	got := false
	for !got {
		if err := c.ring.submit(1); err != nil {
			return 0, err
		}
		c.ring.reap(func(e cqe) { res, got = e.Res, true })
	}
	if buf != nil {
		copy(unsafe.Slice((*byte)(buf), n), c.page)
	}
	if res < 0 {
		return res, fmt.Errorf("ublk %s: %w", ctrlNames[nr], unix.Errno(-res))
	}
	return res, nil
}

// AddDev creates a device from info (DevID ^uint32(0) for any free id)
// and returns the kernel's view of it.
func (c *Control) AddDev(info DevInfo) (DevInfo, error) {
	p := new(DevInfo)
	*p = info
	_, err := c.run(cmdAddDev, info.DevID, 0, unsafe.Pointer(p), int(unsafe.Sizeof(*p)))
	return *p, err
}

// DevInfo reads a device's information.
func (c *Control) DevInfo(id uint32) (DevInfo, error) {
	p := new(DevInfo)
	_, err := c.run(cmdGetDevInfo, id, 0, unsafe.Pointer(p), int(unsafe.Sizeof(*p)))
	return *p, err
}

// QueueAffinity lists the CPUs whose requests go to queue q of a device
// (blk-mq's map, set when the device was added).
func (c *Control) QueueAffinity(id uint32, q int) ([]int, error) {
	// The kernel wants room for every possible CPU, in whole longs.
	mask := make([]uint64, 512)
	if _, err := c.run(cmdGetQueueAffinity, id, uint64(q), unsafe.Pointer(&mask[0]), len(mask)*8); err != nil {
		return nil, err
	}
	var cpus []int
	for i, w := range mask {
		for b := 0; b < 64; b++ {
			if w&(1<<b) != 0 {
				cpus = append(cpus, i*64+b)
			}
		}
	}
	return cpus, nil
}

// setParams sets the basic and discard parameters (before START_DEV).
func (c *Control) setParams(id uint32, p *params) error {
	p.Len = paramsLen
	_, err := c.run(cmdSetParams, id, 0, unsafe.Pointer(p), paramsLen)
	return err
}

// StartDev makes the block device appear; every queue must have fetched
// its requests first (the kernel waits for that).
func (c *Control) StartDev(id uint32) error {
	for {
		_, err := c.run(cmdStartDev, id, uint64(os.Getpid()), nil, 0)
		if errors.Is(err, unix.EINTR) {
			continue // the wait for the queues was interrupted; nothing changed
		}
		return err
	}
}

// StopDev removes the block device and aborts the queues' fetches.
func (c *Control) StopDev(id uint32) error {
	_, err := c.run(cmdStopDev, id, 0, nil, 0)
	return err
}

// DelDev deletes a stopped device; the kernel waits until /dev/ublkcN is
// closed.
func (c *Control) DelDev(id uint32) error {
	_, err := c.run(cmdDelDev, id, 0, nil, 0)
	return err
}

// getParams reads the parameters a device was given.
func (c *Control) getParams(id uint32) (*params, error) {
	p := &params{Len: paramsLen}
	_, err := c.run(cmdGetParams, id, 0, unsafe.Pointer(p), paramsLen)
	return p, err
}

// startRecovery readies a quiesced device for a new server: its queues
// take FETCH_REQ again.
func (c *Control) startRecovery(id uint32) error {
	_, err := c.run(cmdStartUserRecovery, id, 0, nil, 0)
	return err
}

// endRecovery hands the device to this process once every queue has
// fetched (the kernel waits for that) and lets the waiting I/O through.
func (c *Control) endRecovery(id uint32) error {
	for {
		_, err := c.run(cmdEndUserRecovery, id, uint64(os.Getpid()), nil, 0)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		return err
	}
}
