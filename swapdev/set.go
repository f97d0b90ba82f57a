// Package swapdev is swap's control plane (#28, issue 40): the set of
// swap devices a daemon serves, block devices made through the kernel's
// ublk driver (package ublk) whose queues are C threads and whose pages
// live in a C store outside the Go runtime (package swapio). It creates
// the devices the configuration's [[swap]] tables name when the daemon
// starts serving and those SWAP asks for, takes over those the last run
// left (keep.go), hands their pages to the daemon's store across a
// restart (nativekeep.go), and removes them when the daemon stops.
//
// The daemon only wires it up: it builds the Set, routes SWAP to Add, Del
// and List, converting to and from the wire's types, and calls Start and
// Stop. What the set needs of the daemon is Config and Store.
package swapdev

import (
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/s4d-project/s4d/settings"
	"github.com/s4d-project/s4d/swapio"
	"github.com/s4d-project/s4d/ublk"
)

// Config is what the set takes from the daemon's settings; none of it
// changes while the daemon runs.
type Config struct {
	PageSize int // the daemon's: swap needs 4096
	// Persist: a stop keeps the store's pages on the backing file;
	// Takeover: devices outlive the daemon (ublk user recovery). With
	// both, a stop leaves the devices to the next start.
	Persist, Takeover bool
	Specs             []settings.SwapSpec // the [[swap]] tables, made at Start
	// Dir is where the records live (keep.go): the socket's directory.
	Dir string
	// Writeback is where a device with a memory limit writes its pages
	// back when its request names no place: the daemon's state directory.
	Writeback string
	Log       *slog.Logger
	Quit      <-chan struct{} // closed when the daemon starts stopping
}

// Set is the daemon's swap devices.
type Set struct {
	cfg   Config
	log   *slog.Logger
	store Store // where pages wait across a restart (nativekeep.go)

	mu   sync.Mutex
	devs []*device
	next int // number of the next device, and of its pool across restarts
	// orphans are devices of the last run not taken over (keep.go).
	orphans []record
	// take, when a test sets it, takes a device of the last run over in
	// place of the kernel's ublk.
	take func(r record, trusted bool) (*device, error)
	// guarded: the swap path's code is locked (guard).
	guarded bool
	// follow starts followSwapoff once.
	follow sync.Once
	// keepErr: a stop with persist could not keep a device's pages
	// (export); the records then do not say clean.
	keepErr error
}

type device struct {
	n      int
	dev    *ublk.Device
	nat    *swapio.Store // its pages (native.go)
	active bool          // in /proc/swaps when last looked (followSwapoff)
	// fresh: created empty here, so mkswap may write it; a device
	// reattached with pages in use would not be. prio: for swapon.
	fresh bool
	prio  int
	rec   record // what the next daemon needs to take it over
}

// New is the daemon's set of swap devices, empty until Start.
func New(cfg Config, store Store) *Set {
	return &Set{cfg: cfg, log: cfg.Log, store: store}
}

// Add creates a device, as SWAP asks.
func (s *Set) Add(req Request) (Device, error) { return s.add(req, "", -1, -1) }

// add creates a device of req.Size bytes; spec is the [[swap]] table it
// comes from (-1: SWAP).
func (s *Set) add(req Request, codec string, prio, spec int) (Device, error) {
	if s.cfg.PageSize != 4096 {
		return Device{}, errorf(Failed, "swap needs a page size of 4096 (the daemon's is %d)", s.cfg.PageSize)
	}
	if req.Size < 1<<20 {
		return Device{}, errorf(Malformed, "swap size %d bytes: want at least 1 MiB", req.Size)
	}
	if err := ublk.Available(); err != nil {
		return Device{}, errorf(Failed, "%v", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.addNative(req, codec, prio, spec)
}

// Del removes the device named (all with ""), refusing one in use.
func (s *Set) Del(name string) ([]Device, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if name != "" && !strings.HasPrefix(name, "/dev/") {
		name = "/dev/" + name
	}
	active := ublk.ActiveSwaps()
	var out []Device
	keep := s.devs[:0]
	var errs []error
	for _, sd := range s.devs {
		path := sd.dev.BlockPath()
		if name != "" && path != name {
			keep = append(keep, sd)
			continue
		}
		if active[path] {
			errs = append(errs, errorf(Failed, "%s is in use as swap: run `swapoff %s` first", path, path))
			keep = append(keep, sd)
			continue
		}
		out = append(out, s.describe(sd))
		s.remove(sd)
	}
	s.devs = keep
	s.release()
	if err := s.save(false, 0); err != nil {
		s.log.Error("swap records not written", "err", err)
	}
	if len(errs) > 0 {
		return out, errors.Join(errs...)
	}
	if name != "" && len(out) == 0 {
		return nil, errorf(NotFound, "no swap device %s", name)
	}
	return out, nil
}

// remove stops a device and drops its pages.
func (s *Set) remove(sd *device) {
	if err := sd.dev.Close(); err != nil {
		// A queue may still touch the store: it is left allocated.
		s.log.Error("swap device", "device", sd.dev.BlockPath(), "err", err)
	} else {
		sd.nat.Close() // every byte back, once the queues have stopped
	}
	s.log.Info("swap device removed", "device", sd.dev.BlockPath())
}

// followSwapoff empties a device when it stops being swap: after swapoff
// no block holds anything in use, but the kernel discards only whole free
// clusters, and a slot freed by an exiting process is never reported to a
// ublk device (zram has a hook for it). Block 0, the swap header, stays
// for a swapon without mkswap, unless lost with a crash: then the device
// is emptied whole and fresh, for `s4d swap on` to run mkswap.
func (s *Set) followSwapoff() {
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-s.cfg.Quit:
			return
		case <-tick.C:
		}
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
					s.log.Info("swapoff seen: pages dropped", "device", sd.dev.BlockPath(), "pages", before-sd.nat.Stats().Pages, "fresh", sd.fresh)
				} else {
					// In use again: emptied at its next swapoff.
					s.log.Info("swapoff seen, but the device was written since: pages kept", "device", sd.dev.BlockPath())
					now = true
				}
			}
			sd.active = now
		}
		s.mu.Unlock()
	}
}

// Stop, when the daemon stops with persist, leaves every device to the
// next start (keep) and says so: the daemon then persists its store and
// calls Persisted. Else it removes them: a device still in use as swap is
// turned off first, which brings its pages back into the processes that
// own them: removing it under them would kill them. The daemon's store
// must still serve meanwhile (a swapoff reads every page).
func (s *Set) Stop() bool {
	if s.cfg.Persist && s.cfg.Takeover {
		return s.keep()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	active := ublk.ActiveSwaps()
	had := len(s.devs) > 0
	var stay []*device
	for _, sd := range s.devs {
		if path := sd.dev.BlockPath(); active[path] {
			s.log.Info("swapoff before stopping", "device", path)
			if err := swapoff(path); err != nil {
				// Its I/O waits for the next start, which takes it over.
				s.log.Error("swapoff failed; the device stays (its pages are still in use)", "device", path, "err", err)
				stay = append(stay, sd)
				continue
			}
		}
		s.remove(sd)
	}
	s.devs = stay
	if had {
		if err := s.save(false, 0); err != nil {
			s.log.Error("swap records not written", "err", err)
		}
	}
	return false
}

// Start takes over the devices the last run left, then creates those of
// the configuration not among them. seq is the backing file's checkpoint
// number as this start found it (keep.go).
func (s *Set) Start(seq uint64) {
	var taken []int
	if s.cfg.Takeover {
		taken = s.recover(seq)
	}
	for i, spec := range s.cfg.Specs {
		if slices.Contains(taken, i) {
			continue
		}
		size := spec.Bytes(settings.RAM())
		dev, err := s.add(Request{Size: size, Queues: spec.Queues, Depth: spec.Depth, MemLimit: spec.MemLimit, Writeback: spec.Writeback}, spec.Codec, spec.Priority, i)
		if err != nil {
			s.log.Error("swap device from the configuration not created", "swap", i+1, "size", size, "err", err)
			continue
		}
		s.log.Info("swap device from the configuration", "swap", i+1, "device", dev.Name)
	}
}

// List describes every device.
func (s *Set) List() []Device {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := []Device{}
	for _, sd := range s.devs {
		out = append(out, s.describe(sd))
	}
	return out
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
