package bench

import (
	"bytes"
	"context"
	"fmt"
	"runtime"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/s4d-project/s4d/backends"
	"github.com/s4d-project/s4d/pagecache"
	"github.com/s4d-project/s4d/pagefmt"
)

// StageFigure is one stage of an engine's time in one phase (PUT or GET):
// seconds summed over its batches (stages of concurrent batches overlap),
// the bytes it moved, its rate while busy, and its busy time over the
// phase's wall time (1.0: busy all along; above 1: overlapping itself).
type StageFigure struct {
	Name    string  `json:"stage"`
	Seconds float64 `json:"seconds"`
	Bytes   int64   `json:"bytes,omitempty"`
	GBps    float64 `json:"gb_per_s_busy,omitempty"`
	Wall    float64 `json:"gb_per_s_wall,omitempty"` // bytes over the phase's wall time
	Share   float64 `json:"busy_share"`
	// Occupied is the share of the wall time the stage was at work at
	// all (its intervals' union; GPU stages): near 1 it bounds the rate.
	Occupied float64 `json:"occupied_share,omitempty"`
}

// stagesOf snapshots an engine's breakdown (nil if it keeps none).
func stagesOf(b backends.Backend) []backends.Stage {
	if s, ok := b.(backends.Staged); ok {
		return s.Stages()
	}
	return nil
}

// stageFigures is the breakdown between two snapshots over wall seconds.
func stageFigures(before, after []backends.Stage, wall float64) []StageFigure {
	if len(before) != len(after) {
		return nil
	}
	out := make([]StageFigure, len(after))
	for i, a := range after {
		sec, n := a.Seconds-before[i].Seconds, a.Bytes-before[i].Bytes
		out[i] = StageFigure{Name: a.Name, Seconds: sec, Bytes: n, GBps: div(float64(n)/1e9, sec),
			Wall: div(float64(n)/1e9, wall), Share: div(sec, wall), Occupied: div(a.Busy-before[i].Busy, wall)}
	}
	return out
}

// timedPlacer times the engine's placing inside the store's Put, so that
// the store's own work (reserving slots, publishing entries) shows apart.
type timedPlacer struct {
	pagefmt.Placer
	took time.Duration
}

func (p *timedPlacer) Place(dst [][]byte) error {
	t := time.Now()
	err := p.Placer.Place(dst)
	p.took += time.Since(t)
	return err
}

// benchStores are the stores of runStored, by engine.
var benchStores = map[backends.Backend]*pagecache.Store{}

// runStored measures b the way the daemon uses it, without the socket:
// the pages lie in memory registered with the engine (a client's memfd),
// each batch is compressed in parts placed straight into a store whose
// slabs are registered too, then read back in place (View) and expanded
// into registered memory, and compared. The store is the engine's for the
// whole bench (emptied after each run), as the daemon's lives on: its slabs
// are registered once, not in every run.
func runStored(ctx context.Context, b backends.Backend, codec pagefmt.Codec, pages []byte, pageSize, batch, clients int, prog *progress) (Result, error) {
	pin, ok1 := b.(backends.Pinner)
	pc, ok2 := b.(backends.PartCompressor)
	if !ok1 || !ok2 {
		return Result{}, fmt.Errorf("%s: --store needs an engine that pins memory and compresses in parts", b.Name())
	}
	mapped := func(n int) ([]byte, func(), error) {
		m, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
		if err != nil {
			return nil, nil, err
		}
		unpin, err := pin.Pin(m)
		if err != nil {
			unix.Munmap(m)
			return nil, nil, err
		}
		return m, func() { unpin(); unix.Munmap(m) }, nil
	}
	src, freeSrc, err := mapped(len(pages))
	if err != nil {
		return Result{}, err
	}
	defer freeSrc()
	copy(src, pages)
	dst, freeDst, err := mapped(len(pages))
	if err != nil {
		return Result{}, err
	}
	defer freeDst()
	store := benchStores[b]
	if store == nil {
		store = pagecache.New(pageSize, 0)
		store.SetPinner(pin)
		benchStores[b] = store
	}

	n := len(pages) / pageSize
	nb := (n + batch - 1) / batch
	keys := make([]uint64, n)
	for i := range keys {
		keys[i] = uint64(i)
	}
	res := make([]pagecache.Result, n)
	defer store.Del(0, "bench", keys, res)
	threshold := pageSize * 3 / 4
	res0 := Result{Mode: "inproc-store", Backend: b.Name(), Codec: codec.String(), Batch: batch, Clients: clients,
		Pages: n, OrigBytes: int64(n) * int64(pageSize)}
	label := fmt.Sprintf("inproc-store %s %s batch %d", b.Name(), codec, batch)
	prog.phase(label+" PUT", int64(n))
	runtime.GC()
	var storeNs atomic.Int64 // in the store's Put, placing aside
	st0, cpu0, t0 := stagesOf(b), processCPU(), time.Now()
	putLat, err := fanOut(nb, clients, func(i int) error {
		lo, hi := i*batch, min((i+1)*batch, n)
		in := &pagefmt.Batch{PageSize: pageSize, Pages: src[lo*pageSize : hi*pageSize], Codec: codec,
			Threshold: threshold, Sums: true, Placed: true}
		err := pc.CompressParts(ctx, in, func(at int, part *pagefmt.Compressed) error {
			k := len(part.Class)
			p := in.Part(at, k)
			t := time.Now()
			tp := &timedPlacer{Placer: part.Place}
			if part.Place != nil {
				part.Place = tp
			}
			err := store.Put(0, "bench", keys[lo+at:lo+at+k], &p, part, 0, res[lo+at:lo+at+k])
			storeNs.Add(int64(time.Since(t) - tp.took))
			return err
		})
		prog.add(int64(hi - lo))
		return err
	})
	res0.PutSeconds = time.Since(t0).Seconds()
	putCPU := processCPU() - cpu0
	res0.PutStages = append(stageFigures(st0, stagesOf(b), res0.PutSeconds), StageFigure{Name: "store",
		Seconds: float64(storeNs.Load()) / 1e9, Share: div(float64(storeNs.Load())/1e9, res0.PutSeconds)})
	if err != nil {
		return res0, fmt.Errorf("%s compress into the store: %w", b.Name(), err)
	}
	for i, r := range res {
		if r != pagecache.OK {
			return res0, fmt.Errorf("%s: page %d stored as %v", b.Name(), i, r)
		}
	}
	res0.StoredBytes = int64(store.Stats().ComprDataSize)

	prog.phase(label+" GET", int64(n))
	runtime.GC()
	storeNs.Store(0) // in the store's View (lookups; checksums unless the engine checks them), decoding aside
	// As the daemon reads: an engine that checks pages' sums as it decodes
	// them is handed them unchecked.
	view := store.View
	if _, ok := b.(backends.SumChecker); ok {
		view = store.ViewUnchecked
	}
	st0, cpu0, t0 = stagesOf(b), processCPU(), time.Now()
	getLat, err := fanOut(nb, clients, func(i int) error {
		lo, hi := i*batch, min((i+1)*batch, n)
		r := make([]pagecache.Result, hi-lo)
		t := time.Now()
		var dec time.Duration
		defer func() { storeNs.Add(int64(time.Since(t) - dec)) }()
		_, err := view(0, "bench", keys[lo:hi], nil, r, func(stored []pagefmt.Stored) error {
			d := &pagefmt.Decompression{PageSize: pageSize, Src: stored, Dst: dst[lo*pageSize : hi*pageSize]}
			td := time.Now()
			err := b.Decompress(ctx, d)
			dec = time.Since(td)
			if err != nil {
				return err
			}
			for j, f := range d.Failed {
				if f || r[j] != pagecache.OK {
					return fmt.Errorf("page %d did not come back (%v)", lo+j, r[j])
				}
			}
			return nil
		})
		prog.add(int64(hi - lo))
		return err
	})
	res0.GetSeconds = time.Since(t0).Seconds()
	getCPU := processCPU() - cpu0
	res0.GetStages = append(stageFigures(st0, stagesOf(b), res0.GetSeconds), StageFigure{Name: "store",
		Seconds: float64(storeNs.Load()) / 1e9, Share: div(float64(storeNs.Load())/1e9, res0.GetSeconds)})
	if err != nil {
		return res0, fmt.Errorf("%s decompress from the store: %w", b.Name(), err)
	}
	if !bytes.Equal(dst, pages) {
		return res0, fmt.Errorf("%s %s: pages came back from the store different from what was put", b.Name(), codec)
	}
	res0.PutLatency, res0.GetLatency = summarise(putLat), summarise(getLat)
	res0.finish(putCPU, getCPU)
	return res0, nil
}
