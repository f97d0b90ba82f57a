package daemon

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/s4d-project/s4d/ipc"
	"github.com/s4d-project/s4d/pagecache"
	"github.com/s4d-project/s4d/pagefmt"
	"github.com/s4d-project/s4d/settings"
	"github.com/s4d-project/s4d/swapio"
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
	// spare is the memory the store keeps ready for swap-outs: the
	// devices' reserves together (keepSpare refills it).
	spare atomic.Uint64
	// refill wakes keepSpare at once when a swap-out found no spare.
	refill chan struct{}
	// orphans are devices of the last run not taken over (swapkeep.go).
	orphans []swapRecord
	// live is devs' devices for the stall watch, which takes no lock;
	// valve is the memory it hands the kernel (swapvalve.go).
	live  atomic.Pointer[[]*ublk.Device]
	valve *valve
	// take, when a test sets it, takes a device of the last run over in
	// place of the kernel's ublk (no memory guard either).
	take func(r swapRecord, trusted bool) (*swapDev, error)
	// nativeGuarded: the native path's code is locked (guardNative).
	nativeGuarded bool
	// follow starts followSwapoff once, for either path.
	follow sync.Once
	// keepErr: a stop with persist could not keep a native device's
	// pages (exportNative); the records then do not say clean.
	keepErr error
}

type swapDev struct {
	n      int
	dev    *ublk.Device
	st     *swapStore    // the Go path's store (nil on the native path)
	nat    *swapio.Store // the native path's (swapnative.go)
	active bool          // in /proc/swaps when last looked (followSwapoff)
	// fresh: created empty here, so mkswap may write it; a device
	// reattached with pages in use would not be. prio: for swapon.
	fresh bool
	prio  int
	rec   swapRecord // what the next daemon needs to take it over
}

// setSwapCodec gives a device's pool its own codec.
func (d *Daemon) setSwapCodec(st *swapStore, codec string) error {
	c, err := pagefmt.ParseCodec(codec)
	if err != nil {
		return errorf(ipc.CodeMalformed, "%v", err)
	}
	st.codec = c
	if err := d.store.SetPoolCodec(0, st.pool, c); err != nil {
		return storeErr(err, st.pool)
	}
	return nil
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
	if d.cfg.SwapIO == "native" {
		return d.addNativeSwap(req, codec, prio, spec)
	}
	d.guardMemory()
	queues := req.Queues
	if queues == 0 {
		queues = min(runtime.NumCPU(), ublk.MaxQueues)
	}
	s.next++
	st := newSwapStore(d, swapPool(s.next), queues)
	if codec != "" {
		if err := d.setSwapCodec(st, codec); err != nil {
			return ipc.SwapDevice{}, err
		}
	}
	opts := ublk.Options{Size: req.Size, Queues: queues, Depth: req.Depth, Recovery: d.cfg.SwapTakeover, Log: d.log}
	if err := d.setAside(st, req, opts.Batch()); err != nil {
		return ipc.SwapDevice{}, err
	}
	dev, err := ublk.Create(opts, st)
	if err != nil {
		return ipc.SwapDevice{}, errorf(ipc.CodeFailed, "%v", err)
	}
	if dev.Flusher != nil {
		d.log.Warn("swap queue threads are not I/O flushers (needs CAP_SYS_RESOURCE): under memory pressure they may wait on reclaim", "err", dev.Flusher)
	}
	sd := &swapDev{n: s.next, dev: dev, st: st, fresh: true, prio: prio, rec: swapRecord{ID: dev.ID, N: s.next,
		Size: dev.Size(), Queues: queues, Depth: dev.Depth(), Reserve: req.Reserve, Codec: codec, Prio: prio, Spec: spec}}
	s.devs = append(s.devs, sd)
	s.publish()
	if err := d.saveSwaps(false); err != nil {
		d.log.Error("swap records not written: after a crash the next start would not take this device over", "err", err)
	}
	d.log.Info("swap device added", "device", dev.BlockPath(), "size", dev.Size(), "queues", dev.Queues(), "pool", st.pool)
	return d.describeSwap(sd), nil
}

// guardMemory, at the first device: a swap backend that needs memory to
// free memory deadlocks, and a user process may get none at all once the
// machine is at its min watermark (the kernel's reclaim, zram's, may dip
// into the reserves). So every page the daemon maps is made present and
// locked now and as it maps more (found in the guest: with MCL_ONFAULT,
// first touches of zero pages, Go runtime metadata and code on tmpfs
// stalled the I/O path); the OOM killer is told to spare the daemon; the
// Go heap gets a soft bound unless GOMEMLIMIT set one.
func (d *Daemon) guardMemory() {
	if d.swaps.locked {
		return
	}
	d.swaps.locked = true
	d.swaps.refill = make(chan struct{}, 1)
	d.swapWatch()
	if err := lockAll(); err != nil {
		d.log.Warn("mlockall failed (needs CAP_IPC_LOCK or a memlock limit): the daemon's own memory may be swapped out", "err", err)
	} else if n, err := lockFiles(); err != nil {
		d.log.Warn("locking the daemon's code", "err", err)
	} else {
		d.log.Info("daemon's code locked in memory", "bytes", n)
	}
	// Killing the daemon would kill every process with pages on its
	// devices: the OOM killer must pick another.
	if err := os.WriteFile("/proc/self/oom_score_adj", []byte("-1000"), 0); err != nil {
		d.log.Warn("oom_score_adj not lowered (needs CAP_SYS_RESOURCE)", "err", err)
	}
	if !ublk.IsFlusher() {
		d.log.Warn("the daemon is not an I/O flusher as a whole (needs CAP_SYS_RESOURCE at start): heavy swapping may deadlock in reclaim")
	}
	limit := debug.SetMemoryLimit(-1)
	if limit == math.MaxInt64 {
		limit = min(max(int64(settings.RAM()/8), 32<<20), 2<<30)
		debug.SetMemoryLimit(limit)
	}
	// Threads made now, while memory is to be had: a thread the runtime
	// starts later gets a fresh stack. Sixteen goroutines blocked in a
	// system call at once leave as many idle threads.
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			ts := unix.Timespec{Nsec: 50e6}
			unix.Nanosleep(&ts, nil)
		})
	}
	wg.Wait()
	// The memory profiler keeps a sampled allocation's call stack in
	// memory the runtime maps as it goes, on whatever thread allocated:
	// a daemon serving swap maps nothing it need not (growHeap).
	runtime.MemProfileRate = 0
	grown := growHeap(limit)
	d.log.Info("Go heap bounded for swap and grown to its bound", "limit", limit, "heap_bytes", grown)
	if v, err := newValve(valveSize()); err != nil {
		d.log.Warn("no relief valve for swap: a stall in reclaim may last", "err", err)
	} else {
		d.swaps.valve = v
		d.log.Info("relief valve for swap made", "bytes", len(v.mem))
		go d.watchStalls(v)
	}
	go d.keepSpare()
	d.swaps.follow.Do(func() { go d.followSwapoff() })
}

// setAside reserves memory for the device's compressed pages and grows
// the write path's buffers to a batch's size, while memory is to be had:
// once the machine swaps, it has none to give (slab.Arena.Reserve).
// The reserve is req.Reserve, by default a quarter of RAM (what a
// workload twice the RAM needs at a ratio of 5), at most half the device
// and within the memory limit.
func (d *Daemon) setAside(st *swapStore, req ipc.SwapRequest, batch int) error {
	want := req.Reserve
	if want == 0 {
		want = min(settings.RAM()/4, req.Size/2)
	}
	if lim := d.cfg.MemLimit; lim > 0 {
		want = min(want, lim)
	}
	got, err := d.store.Reserve(want)
	if err != nil {
		return errorf(ipc.CodeNoSpace, "setting aside %d bytes for swap: %v", want, err)
	}
	if err := st.warm(batch, req.Size); err != nil {
		return errorf(ipc.CodeFailed, "swap write path: %v", err)
	}
	d.swaps.spare.Add(got)
	// From now on the store maps nothing while a write waits: a swap-out
	// that finds the reserve used up fails (the kernel keeps the page
	// and retries it) while keepSpare refills (guardMemory's comment).
	d.store.MapOnlyReserve(true)
	d.log.Info("memory set aside for swap", "bytes", got, "spare", d.store.Spare(), "batch_pages", batch)
	return nil
}

// keepSpare refills the store's spare memory when swap-outs have used
// half of it, an eighth of the reserve at a time, from a goroutine of its
// own: if memory is short it waits (in a system call, MapReserve) while
// the devices go on serving from what is left, and every swap-out they
// finish frees a page for it.
//
// Its thread is no I/O flusher: its reclaim may then swap out to the
// devices, whose servers never wait for it (a write finding no spare
// fails at once), whereas a flusher's reclaim could only drop file pages
// and would wait for good once anonymous memory is all that is left.
func (d *Daemon) keepSpare() {
	runtime.LockOSThread() // the mark is the thread's: this one is never given back
	if err := unix.Prctl(unix.PR_SET_IO_FLUSHER, 0, 0, 0, 0); err != nil && ublk.IsFlusher() {
		d.log.Warn("the swap reserve's refiller stays an I/O flusher", "err", err)
	}
	d.log.Info("swap reserve refiller started", "tid", unix.Gettid()) // to find it in a stall's stacks
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-d.quit:
			return
		case <-tick.C:
		case <-d.swaps.refill:
		}
		d.refillValve()
		want := d.swaps.spare.Load()
		if want == 0 || d.store.Spare() >= want*3/4 {
			continue
		}
		if _, err := d.store.Reserve(max(want/8, 1<<20)); err != nil {
			d.log.Warn("refilling swap's spare memory", "err", err)
		}
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
	s.publish()
	d.releaseNative()
	if err := d.saveSwaps(false); err != nil {
		d.log.Error("swap records not written", "err", err)
	}
	if len(keep) == 0 {
		d.store.MapOnlyReserve(false) // no swap-out left to serve
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
	err := sd.dev.Close()
	if err != nil {
		d.log.Error("swap device", "device", sd.dev.BlockPath(), "err", err)
	}
	if sd.nat != nil {
		if err == nil {
			sd.nat.Close() // every byte back, once the queues have stopped
		}
		d.log.Info("swap device removed (native path)", "device", sd.dev.BlockPath())
		return
	}
	d.dropBlocks(sd.st, sd.dev.Size(), 0)
	d.log.Info("swap device removed", "device", sd.dev.BlockPath(), "pool", sd.st.pool)
}

// dropBlocks deletes the pages of a device of size bytes from block
// first on.
func (d *Daemon) dropBlocks(st *swapStore, size, first uint64) {
	blocks := size / 4096
	keys := make([]uint64, 0, 16384)
	res := make([]pagecache.Result, cap(keys))
	for k := first; k < blocks; {
		keys = keys[:0]
		for ; k < blocks && len(keys) < cap(keys); k++ {
			keys = append(keys, k)
		}
		if err := d.store.Del(0, st.pool, keys, res[:len(keys)]); err != nil {
			break // no pool: nothing was ever written
		}
	}
}

// followSwapoff empties a device's pool when it stops being swap: after
// swapoff no block holds anything in use, but the kernel discards only
// whole free clusters, and a slot freed by an exiting process is never
// reported to a ublk device (zram has a hook for it). Block 0, the swap
// header, stays: a later swapon without mkswap needs it. After a crash's
// takeover the header cannot be vouched for (it reads as an I/O error, so
// swapon fails, and so does mkswap, which reads the block it rewrites in
// part): with nothing in use, the device is emptied whole and every block
// reads as zeros again, and it is fresh, for `s4d swap on` to run mkswap.
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
			if sd.st != nil {
				seen[i] = sd.st.writes.Load()
			} else {
				seen[i] = sd.nat.Writes()
			}
		}
		active := ublk.ActiveSwaps()
		for i, sd := range s.devs {
			now := active[sd.dev.BlockPath()]
			if sd.nat != nil {
				if sd.active && !now {
					// Block 0, the swap header, stays for a swapon without
					// mkswap, unless lost with a crash: then the device is
					// fresh, for s4d swap on to run mkswap.
					before := sd.nat.Stats().Pages
					lost0 := sd.nat.Lost(0)
					if sd.nat.Empty(seen[i], true) {
						sd.fresh = sd.fresh || lost0
						d.log.Info("swapoff seen: pages dropped", "device", sd.dev.BlockPath(), "pages", before-sd.nat.Stats().Pages, "fresh", sd.fresh)
					} else {
						d.log.Info("swapoff seen, but the device was written since: pages kept", "device", sd.dev.BlockPath())
						now = true
					}
				}
				sd.active = now
				continue
			}
			if sd.active && !now {
				dropped, ok := d.emptyAfterSwapoff(sd, seen[i])
				if ok {
					d.log.Info("swapoff seen: pages dropped", "device", sd.dev.BlockPath(), "pages", dropped, "fresh", sd.fresh)
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

// emptyAfterSwapoff drops the pages of a device seen no longer swap, and
// says how many, unless it was written since its count of writes was
// seen: a swapon right after the swapoff may have pages on it already,
// and dropping them would make them read back as zeros. The store's gate
// holds writes off meanwhile.
func (d *Daemon) emptyAfterSwapoff(sd *swapDev, seen uint64) (uint64, bool) {
	st := sd.st
	st.gate.Lock()
	defer st.gate.Unlock()
	if st.writes.Load() != seen {
		return 0, false
	}
	pages := func() uint64 { p, _ := d.store.PoolInfo(0, st.pool); return p.Pages }
	before := pages()
	if st.known(0) {
		d.dropBlocks(st, sd.rec.Size, 1)
	} else {
		d.dropBlocks(st, sd.rec.Size, 0)
		st.trustEvery()
		sd.fresh = true
	}
	return before - pages(), true
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
	s.publish()
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
	if sd.nat != nil {
		out := ipc.SwapDevice{Name: sd.dev.BlockPath(), DiskSize: sd.dev.Size(), Streams: sd.dev.Queues(), Depth: sd.dev.Depth(),
			Fresh: sd.fresh, Priority: sd.prio, Kept: d.cfg.Persist && d.cfg.SwapTakeover}
		describeNative(sd, &out)
		if err := sd.dev.Err(); err != nil {
			out.Error = err.Error()
		}
		return out
	}
	dev, st := sd.dev, &sd.dev.Stats
	out := ipc.SwapDevice{Name: dev.BlockPath(), DiskSize: dev.Size(), Pool: sd.st.pool, Streams: dev.Queues(), Depth: dev.Depth(),
		ReadIOs: st.Reads.Calls.Load(), ReadPgs: st.Reads.Pages.Load(), WriteIOs: st.Writes.Calls.Load(), WritePgs: st.Writes.Pages.Load(),
		Discard: st.Discarded.Load(), Errors: st.Errors.Load(), Lost: sd.st.lost.Load(), ValveOpens: d.swaps.valveOpens(), Requests: st.Requests.Load(), Waits: st.Waits.Load(),
		Total: dev.BufferBytes(), Fresh: sd.fresh, Kept: d.cfg.Persist && d.cfg.SwapTakeover, Priority: sd.prio,
		ReadStoreNs: st.Reads.StoreNs.Load(), ReadCopyNs: st.Reads.CopyNs.Load(), WriteStoreNs: st.Writes.StoreNs.Load(), ServeNs: st.ServeNs.Load()}
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
