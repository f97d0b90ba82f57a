package bench

import (
	"bytes"
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/s4d-project/s4d/backends"
	"github.com/s4d-project/s4d/pagefmt"
)

// processCPU returns the CPU time this process has used, user plus system,
// in seconds, over all its threads.
func processCPU() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	tv := func(t syscall.Timeval) float64 { return float64(t.Sec) + float64(t.Usec)/1e6 }
	return tv(ru.Utime) + tv(ru.Stime)
}

// fanOut runs do(i) for every i in [0,n) on `clients` goroutines, each
// taking the next index as it finishes the last, as independent callers
// would. It returns every call's duration and the first error.
func fanOut(n, clients int, do func(i int) error) ([]time.Duration, error) {
	lat := make([]time.Duration, n)
	var next atomic.Int64
	var wg sync.WaitGroup
	var once sync.Once
	var first error
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				t := time.Now()
				err := do(i)
				lat[i] = time.Since(t)
				if err != nil {
					once.Do(func() { first = err })
					next.Store(int64(n)) // stop the others
					return
				}
			}
		}()
	}
	wg.Wait()
	return lat, first
}

// touch writes every page of b so that page faults land before the clock
// starts: the daemon's arena is warm too once it runs.
func touch(b []byte) {
	for i := 0; i < len(b); i += 4096 {
		b[i] = 0xA5
	}
}

// runInproc measures backend b on pages in this process: every batch is
// compressed (PUT), then every batch's stored form is decompressed (GET)
// and compared with the original. Buffers are allocated before the clock
// starts, so the figures are the engine's, not the allocator's.
func runInproc(ctx context.Context, b backends.Backend, codec pagefmt.Codec, pages []byte, pageSize, batch, clients int, prog *progress) (Result, error) {
	n := len(pages) / pageSize
	nb := (n + batch - 1) / batch
	threshold := pageSize * 3 / 4 // the daemon's rule: raw above 3/4 of a page
	ins := make([]pagefmt.Batch, nb)
	outs := make([]pagefmt.Compressed, nb)
	for i := range nb {
		lo, hi := i*batch, min((i+1)*batch, n)
		ins[i] = pagefmt.Batch{PageSize: pageSize, Pages: pages[lo*pageSize : hi*pageSize], Codec: codec, Threshold: threshold}
		outs[i].Reset(hi - lo)
		outs[i].Data = make([]byte, (hi-lo)*threshold)
		touch(outs[i].Data)
		outs[i].Data = outs[i].Data[:0]
	}
	res := Result{Mode: "inproc", Backend: b.Name(), Codec: codec.String(), Batch: batch, Clients: clients,
		Pages: n, OrigBytes: int64(n) * int64(pageSize)}

	label := fmt.Sprintf("inproc %s %s batch %d", b.Name(), codec, batch)
	prog.phase(label+" PUT", int64(n))
	runtime.GC()
	st0, cpu0, t0 := stagesOf(b), processCPU(), time.Now()
	putLat, err := fanOut(nb, clients, func(i int) error {
		err := b.Compress(ctx, &ins[i], &outs[i])
		prog.add(int64(ins[i].Len()))
		return err
	})
	res.PutSeconds = time.Since(t0).Seconds()
	putCPU := processCPU() - cpu0
	res.PutStages = stageFigures(st0, stagesOf(b), res.PutSeconds)
	if err != nil {
		return res, fmt.Errorf("%s compress: %w", b.Name(), err)
	}
	for i := range outs {
		for _, s := range outs[i].Size {
			res.StoredBytes += int64(s)
		}
	}

	decs := make([]pagefmt.Decompression, nb)
	for i := range nb {
		k := ins[i].Len()
		d := &decs[i]
		d.PageSize, d.Src, d.Dst = pageSize, make([]pagefmt.Stored, k), make([]byte, k*pageSize)
		for j := range k {
			d.Src[j] = pagefmt.Stored{Class: outs[i].Class[j], Fill: outs[i].Fill[j], Data: outs[i].Bytes(j, &ins[i])}
		}
		touch(d.Dst) // also makes a page the engine forgot to write differ
	}
	prog.phase(label+" GET", int64(n))
	runtime.GC()
	st0, cpu0, t0 = stagesOf(b), processCPU(), time.Now()
	getLat, err := fanOut(nb, clients, func(i int) error {
		err := b.Decompress(ctx, &decs[i])
		prog.add(int64(len(decs[i].Src)))
		return err
	})
	res.GetSeconds = time.Since(t0).Seconds()
	getCPU := processCPU() - cpu0
	res.GetStages = stageFigures(st0, stagesOf(b), res.GetSeconds)
	if err != nil {
		return res, fmt.Errorf("%s decompress: %w", b.Name(), err)
	}
	for i := range decs {
		for j, failed := range decs[i].Failed {
			if failed {
				return res, fmt.Errorf("%s: page %d of batch %d did not decode", b.Name(), j, i)
			}
		}
		if !bytes.Equal(decs[i].Dst, ins[i].Pages) {
			return res, fmt.Errorf("%s %s: batch %d came back different from what was compressed", b.Name(), codec, i)
		}
	}
	res.PutLatency, res.GetLatency = summarise(putLat), summarise(getLat)
	res.finish(putCPU, getCPU)
	return res, nil
}
