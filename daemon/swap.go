package daemon

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/s4d-project/s4d/ipc"
	"github.com/s4d-project/s4d/settings"
	"github.com/s4d-project/s4d/swapio"
	"github.com/s4d-project/s4d/ublk"
)

// Swap devices (#28): block devices served through the kernel's ublk
// driver, their queues C threads and their pages in a C store outside the
// Go runtime (swapnative.go, package swapio). The daemon owns them: it
// creates those the configuration's [[swap]] tables name when it starts
// serving and those SWAP asks for, and removes them when it stops.

// swapSet is the daemon's swap devices.
type swapSet struct {
	mu   sync.Mutex
	devs []*swapDev
	next int // number of the next device, and of its pool across restarts
	// orphans are devices of the last run not taken over (swapkeep.go).
	orphans []swapRecord
	// take, when a test sets it, takes a device of the last run over in
	// place of the kernel's ublk.
	take func(r swapRecord, trusted bool) (*swapDev, error)
	// guarded: the swap path's code is locked (guardNative).
	guarded bool
	// follow starts followSwapoff once.
	follow sync.Once
	// keepErr: a stop with persist could not keep a device's pages
	// (exportNative); the records then do not say clean.
	keepErr error
}

type swapDev struct {
	n      int
	dev    *ublk.Device
	nat    *swapio.Store // its pages (swapnative.go)
	active bool          // in /proc/swaps when last looked (followSwapoff)
	// fresh: created empty here, so mkswap may write it; a device
	// reattached with pages in use would not be. prio: for swapon.
	fresh bool
	prio  int
	rec   swapRecord // what the next daemon needs to take it over
}

// addSwap creates a device of req.Size bytes; spec is the [[swap]] table
// it comes from (-1: SWAP).
func (d *Daemon) addSwap(req ipc.SwapRequest, codec string, prio, spec int) (ipc.SwapDevice, error) {
	if d.cfg.PageSize != 4096 {
		return ipc.SwapDevice{}, errorf(ipc.CodeFailed, "swap needs a page size of 4096 (the daemon's is %d)", d.cfg.PageSize)
	}
	if req.Size < 1<<20 {
		return ipc.SwapDevice{}, errorf(ipc.CodeMalformed, "swap size %d bytes: want at least 1 MiB", req.Size)
	}
	if err := ublk.Available(); err != nil {
		return ipc.SwapDevice{}, errorf(ipc.CodeFailed, "%v", err)
	}
	s := &d.swaps
	s.mu.Lock()
	defer s.mu.Unlock()
	return d.addNativeSwap(req, codec, prio, spec)
}

// delSwap removes the device named (all with ""), refusing one in use.
func (d *Daemon) delSwap(name string) ([]ipc.SwapDevice, error) {
	s := &d.swaps
	s.mu.Lock()
	defer s.mu.Unlock()
	if name != "" && !strings.HasPrefix(name, "/dev/") {
		name = "/dev/" + name
	}
	active := ublk.ActiveSwaps()
	var out []ipc.SwapDevice
	keep := s.devs[:0]
	var errs []error
	for _, sd := range s.devs {
		path := sd.dev.BlockPath()
		if name != "" && path != name {
			keep = append(keep, sd)
			continue
		}
		if active[path] {
			errs = append(errs, errorf(ipc.CodeFailed, "%s is in use as swap: run `swapoff %s` first", path, path))
			keep = append(keep, sd)
			continue
		}
		out = append(out, d.describeSwap(sd))
		d.removeSwap(sd)
	}
	s.devs = keep
	d.releaseNative()
	if err := d.saveSwaps(false); err != nil {
		d.log.Error("swap records not written", "err", err)
	}
	if len(errs) > 0 {
		return out, errors.Join(errs...)
	}
	if name != "" && len(out) == 0 {
		return nil, errorf(ipc.CodeNotFound, "no swap device %s", name)
	}
	return out, nil
}

// removeSwap stops a device and drops its pages.
func (d *Daemon) removeSwap(sd *swapDev) {
	if err := sd.dev.Close(); err != nil {
		// A queue may still touch the store: it is left allocated.
		d.log.Error("swap device", "device", sd.dev.BlockPath(), "err", err)
	} else {
		sd.nat.Close() // every byte back, once the queues have stopped
	}
	d.log.Info("swap device removed", "device", sd.dev.BlockPath())
}

// followSwapoff empties a device when it stops being swap: after swapoff
// no block holds anything in use, but the kernel discards only whole free
// clusters, and a slot freed by an exiting process is never reported to a
// ublk device (zram has a hook for it). Block 0, the swap header, stays
// for a swapon without mkswap, unless lost with a crash: then the device
// is emptied whole and fresh, for `s4d swap on` to run mkswap.
func (d *Daemon) followSwapoff() {
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-d.quit:
			return
		case <-tick.C:
		}
		s := &d.swaps
		s.mu.Lock()
		// Each device's writes so far, taken before /proc/swaps is read:
		// any later one may be a swapon's, right after the swapoff seen.
		seen := make([]uint64, len(s.devs))
		for i, sd := range s.devs {
			seen[i] = sd.nat.Writes()
		}
		active := ublk.ActiveSwaps()
		for i, sd := range s.devs {
			now := active[sd.dev.BlockPath()]
			if sd.active && !now {
				before := sd.nat.Stats().Pages
				lost0 := sd.nat.Lost(0)
				if sd.nat.Empty(seen[i], true) {
					sd.fresh = sd.fresh || lost0
					d.log.Info("swapoff seen: pages dropped", "device", sd.dev.BlockPath(), "pages", before-sd.nat.Stats().Pages, "fresh", sd.fresh)
				} else {
					// In use again: emptied at its next swapoff.
					d.log.Info("swapoff seen, but the device was written since: pages kept", "device", sd.dev.BlockPath())
					now = true
				}
			}
			sd.active = now
		}
		s.mu.Unlock()
	}
}

// stopSwaps, when the daemon stops with persist, leaves every device to
// the next start (keepSwaps) and says so. Else it removes them: a device
// still in use as swap is turned off first, which brings its pages back
// into the processes that own them: removing it under them would kill them.
func (d *Daemon) stopSwaps() bool {
	if d.cfg.Persist && d.cfg.SwapTakeover {
		return d.keepSwaps()
	}
	s := &d.swaps
	s.mu.Lock()
	defer s.mu.Unlock()
	active := ublk.ActiveSwaps()
	had := len(s.devs) > 0
	var stay []*swapDev
	for _, sd := range s.devs {
		if path := sd.dev.BlockPath(); active[path] {
			d.log.Info("swapoff before stopping", "device", path)
			if err := swapoff(path); err != nil {
				// Its I/O waits for the next start, which takes it over.
				d.log.Error("swapoff failed; the device stays (its pages are still in use)", "device", path, "err", err)
				stay = append(stay, sd)
				continue
			}
		}
		d.removeSwap(sd)
	}
	s.devs = stay
	if had {
		if err := d.saveSwaps(false); err != nil {
			d.log.Error("swap records not written", "err", err)
		}
	}
	return false
}

// startSwaps takes over the devices the last run left, then creates those
// of the configuration not among them.
func (d *Daemon) startSwaps() {
	var taken []int
	if d.cfg.SwapTakeover {
		taken = d.recoverSwaps(d.cold.Seq())
	}
	for i, spec := range d.cfg.Swap {
		if slices.Contains(taken, i) {
			continue
		}
		size := spec.Bytes(settings.RAM())
		dev, err := d.addSwap(ipc.SwapRequest{Size: size, Queues: spec.Queues, Depth: spec.Depth}, spec.Codec, spec.Priority, i)
		if err != nil {
			d.log.Error("swap device from the configuration not created", "swap", i+1, "size", size, "err", err)
			continue
		}
		d.log.Info("swap device from the configuration", "swap", i+1, "device", dev.Name)
	}
}

func (d *Daemon) listSwaps() []ipc.SwapDevice {
	s := &d.swaps
	s.mu.Lock()
	defer s.mu.Unlock()
	out := []ipc.SwapDevice{}
	for _, sd := range s.devs {
		out = append(out, d.describeSwap(sd))
	}
	return out
}

func (d *Daemon) describeSwap(sd *swapDev) ipc.SwapDevice {
	out := ipc.SwapDevice{Name: sd.dev.BlockPath(), DiskSize: sd.dev.Size(), Streams: sd.dev.Queues(), Depth: sd.dev.Depth(),
		Fresh: sd.fresh, Priority: sd.prio, Kept: d.cfg.Persist && d.cfg.SwapTakeover}
	describeNative(sd, &out)
	if err := sd.dev.Flusher(); err != nil {
		out.Flusher = err.Error()
	}
	if err := sd.dev.Err(); err != nil {
		out.Error = err.Error()
	}
	return out
}

// swap answers SWAP. Devices serve the whole machine, so only root may.
func (c *conn) swap(body []byte) ([]byte, error) {
	var req ipc.SwapRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, errorf(ipc.CodeMalformed, "SWAP body: %v", err)
	}
	if c.uid != 0 {
		return nil, errorf(ipc.CodePermission, "only root may manage swap devices")
	}
	switch req.Action {
	case ipc.SwapAdd:
		dev, err := c.d.addSwap(req, "", -1, -1)
		if err != nil {
			return nil, err
		}
		return c.jsonBody([]ipc.SwapDevice{dev})
	case ipc.SwapDel:
		devs, err := c.d.delSwap(req.Device)
		if err != nil {
			return nil, err
		}
		return c.jsonBody(devs)
	case ipc.SwapList:
		return c.jsonBody(c.d.listSwaps())
	}
	return nil, errorf(ipc.CodeMalformed, "SWAP action %q: want add, del or list", req.Action)
}

func swapoff(path string) error {
	p, err := unix.BytePtrFromString(path)
	if err != nil {
		return err
	}
	if _, _, e := unix.Syscall(unix.SYS_SWAPOFF, uintptr(unsafe.Pointer(p)), 0, 0); e != 0 {
		return fmt.Errorf("swapoff %s: %w", path, e)
	}
	return nil
}
