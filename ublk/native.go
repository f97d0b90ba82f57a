package ublk

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/s4d-project/s4d/swapio"
)

// A device's queues are served outside the Go runtime (package swapio):
// the threads are C's, their store is C's; this package keeps the control
// plane (add, parameters, start, stop, delete, user recovery) and maps
// each queue's descriptors for its thread.
type nativeQueues struct {
	queues []*swapio.Queue
	descs  [][]byte
}

// serveNative opens the device's character node and starts a C thread
// per queue, each with a fetch on every tag, and returns once all have
// fetched.
func (d *Device) serveNative() error {
	o := d.opts
	var err error
	if d.cdev, err = openWait(d.CharPath(), 5e9); err != nil {
		return err
	}
	psz := os.Getpagesize()
	n := (o.Depth*int(unsafe.Sizeof(ioDesc{})) + psz - 1) &^ (psz - 1)
	nq := &nativeQueues{}
	d.native = nq
	var errs []error
	for i := 0; i < o.Queues; i++ {
		descs, err := unix.Mmap(d.cdev, descOffset(i, psz), n, unix.PROT_READ, unix.MAP_SHARED|unix.MAP_POPULATE)
		if err != nil {
			errs = append(errs, fmt.Errorf("queue %d: mmap descriptors: %w", i, err))
			break
		}
		nq.descs = append(nq.descs, descs)
		cpus, err := d.ctrl.QueueAffinity(d.ID, i)
		if err != nil {
			o.Log.Warn("ublk queue's CPUs unknown: its thread runs anywhere", "device", d.BlockPath(), "queue", i, "err", err)
		}
		q, err := swapio.StartQueue(o.Server, swapio.QueueSpec{CDev: d.cdev, ID: i, Depth: o.Depth, MaxIO: o.MaxIO, Descs: descs, PlainRing: plainQueueRings, CPUs: cpus})
		if err != nil {
			errs = append(errs, err)
			break
		}
		nq.queues = append(nq.queues, q)
		if len(cpus) > 0 && !q.Pinned() {
			o.Log.Warn("ublk queue's thread runs anywhere: none of its CPUs is allowed here", "device", d.BlockPath(), "queue", i, "cpus", cpus)
		}
	}
	var wg sync.WaitGroup
	for _, q := range nq.queues {
		wg.Go(func() {
			if err := q.Wait(); err != nil {
				o.Log.Error("ublk queue stopped", "device", d.BlockPath(), "err", err)
				d.mu.Lock()
				if d.qerr == nil {
					d.qerr = err
				}
				d.mu.Unlock()
			}
		})
	}
	go func() { wg.Wait(); close(d.done) }()
	return errors.Join(errs...)
}

// detachNative: see Detach.
func (nq *nativeQueues) detach() {
	for _, q := range nq.queues {
		q.Detach()
	}
}

// release gives the queues' memory back once their threads have ended.
func (nq *nativeQueues) release() {
	for _, q := range nq.queues {
		q.Close()
	}
	for _, b := range nq.descs {
		unix.Munmap(b)
	}
	nq.queues, nq.descs = nil, nil
}

// Flusher says why the queue threads are not I/O flushers (nil: they are).
func (d *Device) Flusher() error {
	if d.native != nil {
		for _, q := range d.native.queues {
			if err := q.FlusherErr(); err != nil {
				return err
			}
		}
	}
	return nil
}

// PinnedQueues counts the native queues whose threads run on their
// queue's CPUs only.
func (d *Device) PinnedQueues() int {
	n := 0
	if d.native != nil {
		for _, q := range d.native.queues {
			if q.Pinned() {
				n++
			}
		}
	}
	return n
}

// NativeStats sums the queues' counters.
func (d *Device) NativeStats() swapio.QueueStats {
	var s swapio.QueueStats
	if d.native == nil {
		return s
	}
	for _, q := range d.native.queues {
		t := q.Stats()
		s.Requests += t.Requests
		s.Waits += t.Waits
		s.Reads += t.Reads
		s.ReadPages += t.ReadPages
		s.Writes += t.Writes
		s.WritePages += t.WritePages
		s.Discards += t.Discards
		s.Errors += t.Errors
		s.NoMem += t.NoMem
		s.Held += t.Held
		s.HeldFailed += t.HeldFailed
		s.RingFlags = t.RingFlags
	}
	return s
}
