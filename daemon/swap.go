package daemon

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"runtime/debug"
	"strings"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/s4d-project/s4d/ipc"
	"github.com/s4d-project/s4d/pagecache"
	"github.com/s4d-project/s4d/pagefmt"
	"github.com/s4d-project/s4d/settings"
	"github.com/s4d-project/s4d/ublk"
)

// Swap devices (#28): block devices served through the kernel's ublk
// driver whose 4 KiB blocks are pages of a root pool (swapstore.go). The
// daemon owns them: it creates those the configuration's [[swap]] tables
// name when it starts serving and those SWAP asks for, and removes them
// when it stops.

// swapSet is the daemon's swap devices.
type swapSet struct {
	mu     sync.Mutex
	devs   []*swapDev
	next   int  // number of the next device's pool
	locked bool // memory locked and heap bounded (guardMemory)
}

type swapDev struct {
	n   int
	dev *ublk.Device
	st  *swapStore
}

// addSwap creates a device of req.Size bytes.
func (d *Daemon) addSwap(req ipc.SwapRequest, codec string) (ipc.SwapDevice, error) {
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
	d.guardMemory()
	s.next++
	st := &swapStore{d: d, pool: swapPool(s.next)}
	if codec != "" {
		c, err := pagefmt.ParseCodec(codec)
		if err != nil {
			return ipc.SwapDevice{}, errorf(ipc.CodeMalformed, "%v", err)
		}
		st.codec = c
		if err := d.store.SetPoolCodec(0, st.pool, c); err != nil {
			return ipc.SwapDevice{}, storeErr(err, st.pool)
		}
	}
	dev, err := ublk.Create(ublk.Options{Size: req.Size, Queues: req.Queues, Depth: req.Depth, Log: d.log}, st)
	if err != nil {
		return ipc.SwapDevice{}, errorf(ipc.CodeFailed, "%v", err)
	}
	if dev.Flusher != nil {
		d.log.Warn("swap queue threads are not I/O flushers (needs CAP_SYS_RESOURCE): under memory pressure they may wait on reclaim", "err", dev.Flusher)
	}
	sd := &swapDev{n: s.next, dev: dev, st: st}
	s.devs = append(s.devs, sd)
	d.log.Info("swap device added", "device", dev.BlockPath(), "size", dev.Size(), "queues", dev.Queues(), "pool", st.pool)
	return d.describeSwap(sd), nil
}

// guardMemory, at the first device: a swap backend that needs memory to
// free memory deadlocks, so the daemon's pages are locked as they fault
// in (ONFAULT: the Go runtime reserves address space it never touches)
// and the Go heap gets a soft bound unless GOMEMLIMIT set one.
func (d *Daemon) guardMemory() {
	if d.swaps.locked {
		return
	}
	d.swaps.locked = true
	if err := unix.Mlockall(unix.MCL_CURRENT | unix.MCL_FUTURE | unix.MCL_ONFAULT); err != nil {
		d.log.Warn("mlockall failed (needs CAP_IPC_LOCK or a memlock limit): the daemon's own memory may be swapped out", "err", err)
	}
	// Killing the daemon would kill every process with pages on its
	// devices: the OOM killer must pick another.
	if err := os.WriteFile("/proc/self/oom_score_adj", []byte("-1000"), 0); err != nil {
		d.log.Warn("oom_score_adj not lowered (needs CAP_SYS_RESOURCE)", "err", err)
	}
	if !ublk.IsFlusher() {
		d.log.Warn("the daemon is not an I/O flusher as a whole (needs CAP_SYS_RESOURCE at start): heavy swapping may deadlock in reclaim")
	}
	if debug.SetMemoryLimit(-1) == math.MaxInt64 {
		limit := min(max(int64(settings.RAM()/8), 64<<20), 2<<30)
		debug.SetMemoryLimit(limit)
		d.log.Info("Go heap bounded for swap", "limit", limit)
	}
}

// delSwap removes the device named (all with ""), refusing one in use.
func (d *Daemon) delSwap(name string) ([]ipc.SwapDevice, error) {
	s := &d.swaps
	s.mu.Lock()
	defer s.mu.Unlock()
	if name != "" && !strings.HasPrefix(name, "/dev/") {
		name = "/dev/" + name
	}
	active := activeSwaps()
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
		d.log.Error("swap device", "device", sd.dev.BlockPath(), "err", err)
	}
	blocks := sd.dev.Size() / 4096
	keys := make([]uint64, 0, 16384)
	res := make([]pagecache.Result, cap(keys))
	for k := uint64(0); k < blocks; {
		keys = keys[:0]
		for ; k < blocks && len(keys) < cap(keys); k++ {
			keys = append(keys, k)
		}
		if err := d.store.Del(0, sd.st.pool, keys, res[:len(keys)]); err != nil {
			break // no pool: nothing was ever written
		}
	}
	d.log.Info("swap device removed", "device", sd.dev.BlockPath(), "pool", sd.st.pool)
}

// stopSwaps removes every device when the daemon stops. A device still in
// use as swap is turned off first, which brings its pages back into the
// processes that own them: removing it under them would kill them.
func (d *Daemon) stopSwaps() {
	s := &d.swaps
	s.mu.Lock()
	defer s.mu.Unlock()
	active := activeSwaps()
	for _, sd := range s.devs {
		if path := sd.dev.BlockPath(); active[path] {
			d.log.Info("swapoff before stopping", "device", path)
			if err := swapoff(path); err != nil {
				d.log.Error("swapoff failed; the device stays (its pages are still in use)", "device", path, "err", err)
				continue
			}
		}
		d.removeSwap(sd)
	}
	s.devs = nil
}

// startSwaps creates the devices the configuration names.
func (d *Daemon) startSwaps() {
	for i, spec := range d.cfg.Swap {
		size := spec.Bytes(settings.RAM())
		dev, err := d.addSwap(ipc.SwapRequest{Size: size, Queues: spec.Queues, Depth: spec.Depth}, spec.Codec)
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
	dev, st := sd.dev, &sd.dev.Stats
	out := ipc.SwapDevice{Name: dev.BlockPath(), DiskSize: dev.Size(), Pool: sd.st.pool, Streams: dev.Queues(), Depth: dev.Depth(),
		ReadIOs: st.Reads.Calls.Load(), ReadPgs: st.Reads.Pages.Load(), WriteIOs: st.Writes.Calls.Load(), WritePgs: st.Writes.Pages.Load(),
		Discard: st.Discarded.Load(), Errors: st.Errors.Load(), Requests: st.Requests.Load(), Waits: st.Waits.Load(),
		Total: dev.BufferBytes()}
	for i := range st.BatchPages {
		out.BatchPages = append(out.BatchPages, st.BatchPages[i].Load())
	}
	if p, err := d.store.PoolInfo(0, sd.st.pool); err == nil {
		out.Pages, out.Data, out.Compr = p.Pages, p.Pages*4096, p.StoredBytes
		out.Zero, out.Huge = p.Zero+p.Same, p.Huge
		out.Total += p.StoredBytes
	}
	if dev.Flusher != nil {
		out.Flusher = dev.Flusher.Error()
	}
	if err := dev.Err(); err != nil {
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
		dev, err := c.d.addSwap(req, "")
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

// activeSwaps is the set of devices in /proc/swaps.
func activeSwaps() map[string]bool {
	out := map[string]bool{}
	f, err := os.Open("/proc/swaps")
	if err != nil {
		return out
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if fields := strings.Fields(sc.Text()); len(fields) > 0 && strings.HasPrefix(fields[0], "/") {
			out[fields[0]] = true
		}
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
