package swapdev

import (
	"os"
	"runtime"

	"github.com/s4d-project/s4d/swapio"
	"github.com/s4d-project/s4d/ublk"
)

// Swap served outside the Go runtime (issue 40, package swapio): C queue
// threads and a zram-shaped C store. A backend that needs memory to free
// memory deadlocks; the C path allocates nothing on its I/O path but from
// slabs it keeps locked and ready, and locks its own code, so the Go
// runtime is neither locked nor on that path, and `swap del` gives every
// byte back. Takeover and persist: nativekeep.go.
//
// With a memory limit its coldest pages go to a file or a block device
// while it serves (swapio's writeback). What it does not do: per-device
// codecs (LZ4 only), empty a device that is still swap (discards free
// what the kernel reports; swapoff or `swap del` the rest).

// nativeMaxIO is the largest request a native queue takes: with the
// default depth of 64, 2 MiB of I/O buffers per queue.
const nativeMaxIO = 32 << 10

// guard, at the first device: the code the queue threads run locked in
// memory, and the OOM killer told to spare the daemon (killing it would
// kill every process with pages on its devices).
func (s *Set) guard() {
	if s.guarded {
		return
	}
	s.guarded = true
	if n, err := swapio.LockCode(); err != nil {
		s.log.Warn("the native swap path's code not locked in memory", "err", err, "bytes", n)
	} else {
		s.log.Info("native swap path's code locked in memory", "bytes", n)
	}
	if err := os.WriteFile("/proc/self/oom_score_adj", []byte("-1000"), 0); err != nil {
		s.log.Warn("oom_score_adj not lowered (needs CAP_SYS_RESOURCE)", "err", err)
	}
	s.follow.Do(func() {
		go s.followSwapoff()
		s.watch()
	})
}

// addNative is add's work; s.mu is held.
func (s *Set) addNative(req Request, codec string, prio, spec int) (Device, error) {
	if codec != "" && codec != "lz4" {
		return Device{}, errorf(Malformed, "codec %q: the native swap path stores LZ4 only", codec)
	}
	wb := req.Writeback
	if req.MemLimit == 0 && wb != "" {
		return Device{}, errorf(Malformed, "writeback %s without a memory limit: pages are written back only past one", wb)
	}
	if req.MemLimit > 0 && wb == "" {
		if wb = s.cfg.Writeback; wb == "" {
			return Device{}, errorf(Malformed, "a memory limit needs somewhere to write pages back: name a directory or a block device (the daemon has no state directory)")
		}
	}
	if err := swapio.Available(); err != nil {
		return Device{}, errorf(Failed, "native swap path: %v", err)
	}
	s.guard()
	queues := req.Queues
	if queues == 0 {
		queues = min(runtime.NumCPU(), ublk.MaxQueues)
	}
	st, err := swapio.NewStore(req.Size, swapio.Options{Reserve: req.Reserve, MemLimit: req.MemLimit, Writeback: wb})
	if err != nil {
		return Device{}, errorf(Failed, "native swap store: %v", err)
	}
	if err := st.RefillRT(); err != nil {
		s.log.Warn("the swap reserve's refill is not real-time: under a shortage it competes for memory with the swap-outs that wait for it", "err", err)
	}
	opts := ublk.Options{Size: req.Size, Queues: queues, Depth: req.Depth, MaxIO: nativeMaxIO, Recovery: s.cfg.Takeover, Log: s.log, Server: st}
	dev, err := ublk.Create(opts)
	if err != nil {
		st.Close()
		return Device{}, errorf(Failed, "%v", err)
	}
	s.next++
	sd := &device{n: s.next, dev: dev, nat: st, fresh: true, prio: prio, rec: record{ID: dev.ID, N: s.next,
		Size: dev.Size(), Queues: dev.Queues(), Depth: dev.Depth(), Reserve: req.Reserve, MemLimit: req.MemLimit, Writeback: wb, Codec: codec, Prio: prio, Spec: spec, IO: "native"}}
	s.devs = append(s.devs, sd)
	if err := s.save(false, 0); err != nil {
		s.log.Error("swap records not written: after a crash the next start would not take this device over", "err", err)
	}
	s.log.Info("swap device added", "device", dev.BlockPath(), "size", dev.Size(), "queues", dev.Queues(),
		"depth", dev.Depth(), "io_buffers", dev.BufferBytes(), "reserve", st.Stats().Reserve, "mem_limit", req.MemLimit, "writeback", wb)
	return s.describe(sd), nil
}

// describeNative fills a device's figures.
func describeNative(sd *device, out *Device) {
	st, qs := sd.nat.Stats(), sd.dev.NativeStats()
	out.Pool = "native"
	out.Pages, out.Data, out.Compr = st.Pages, st.Pages*4096, st.ComprBytes
	out.Zero, out.Huge = st.Zero+st.Same, st.Raw
	// What the device holds of the machine's memory: slabs taken, the
	// ring's reserve, the slot table, the I/O buffers.
	out.Total = st.SlabBytes + st.Ready + st.TableBytes + sd.dev.BufferBytes()
	out.ReadIOs, out.ReadPgs, out.WriteIOs, out.WritePgs = qs.Reads, qs.ReadPages, qs.Writes, qs.WritePages
	out.Discard, out.Errors, out.Lost = st.Discards, qs.Errors, st.LostReads
	out.Requests, out.Waits = qs.Requests, qs.Waits
	out.Reserve, out.NoMem, out.Low, out.Pinned = st.Reserve, st.NoMem, st.RingLow, sd.dev.PinnedQueues()
	out.Held, out.HeldFailed = qs.Held, qs.HeldFailed
	out.MemLimit, out.BdCount, out.BdReads, out.BdWrites, out.Writeback = st.MemLimit, st.FilePages, st.FileReads, st.FileWrites, sd.rec.Writeback
	if err := sd.nat.WritebackErr(); err != nil {
		out.BdError = err.Error()
	}
}

// release, after a device is removed: with no device left, the code
// locked for them is unlocked (guard locks it again).
func (s *Set) release() {
	if len(s.devs) == 0 && s.guarded {
		swapio.UnlockCode()
		s.guarded = false
	}
}
