package cu

import (
	"fmt"
	"runtime"
	"sync"
	"testing"

	"github.com/s4d-project/s4d/backends/internal/dl"
)

// BenchmarkLink measures what the host can move to and from its GPUs with
// nothing but the copy engines: pinned buffers, two streams a device, one
// thread a device, on the first 1, 2, 4... GPUs at once. It is the ceiling
// the engine's PUT (upload) and GET (download) work under, and shows
// whether GPUs share a link or a host bridge: if four move no more than two,
// no change in the engine makes four GPUs scale.
//
//	go test -run '^$' -bench Link -benchtime 4x ./backends/cuda/cu
func BenchmarkLink(b *testing.B) {
	d, n := benchDriver(b)
	const chunk = 64 << 20
	var counts []int
	for k := 1; k < n; k *= 2 {
		counts = append(counts, k)
	}
	for _, k := range append(counts, n) {
		for _, dir := range []string{"htod", "dtoh", "both"} {
			b.Run(fmt.Sprintf("gpus=%d/%s", k, dir), func(b *testing.B) {
				moved := linkRun(b, d, k, dir, chunk, b.N, pinnedHost)
				b.ReportMetric(float64(moved)/b.Elapsed().Seconds()/1e9, "GB/s")
				b.ReportMetric(0, "ns/op")
			})
		}
	}
}

// benchDriver loads the CUDA driver and counts the GPUs, skipping the
// benchmark where there are none.
func benchDriver(b *testing.B) (*Driver, int) {
	l, err := dl.Open("libcuda.so.1")
	if err != nil {
		b.Skipf("no CUDA driver: %v", err)
	}
	d := new(Driver)
	if err := d.Load(l); err != nil {
		b.Skip(err)
	}
	if err := d.Init(); err != nil {
		b.Skipf("cuInit: %v", err)
	}
	n, err := d.DeviceCount()
	if err != nil || n == 0 {
		b.Skipf("no GPU: %v", err)
	}
	return d, n
}

// linkRun copies rounds*8 chunks per device and returns the bytes moved.
// The host memory comes from alloc (pinnedHost unless the benchmark
// compares kinds of host memory).
func linkRun(b *testing.B, d *Driver, k int, dir string, chunk, rounds int, alloc hostAlloc) int64 {
	type dev struct {
		host       []byte
		free       func()
		dbuf       DevPtr
		up, down   Stream
		ctx        Context
		setupError error
	}
	devs := make([]dev, k)
	var wg sync.WaitGroup
	setup := func(i int) {
		runtime.LockOSThread()
		v := &devs[i]
		dv, err := d.Device(i)
		if err == nil {
			v.ctx, err = d.PrimaryCtx(dv)
		}
		if err == nil {
			err = d.SetCurrent(v.ctx)
		}
		if err == nil {
			v.host, v.free, err = alloc(d, 2*chunk)
		}
		if err == nil {
			v.dbuf, err = d.Alloc(2 * chunk)
		}
		if err == nil {
			v.up, err = d.StreamCreate()
		}
		if err == nil {
			v.down, err = d.StreamCreate()
		}
		for j := range v.host {
			v.host[j] = byte(j)
		}
		v.setupError = err
	}
	work := func(i int, start <-chan struct{}, moved *int64) {
		v := &devs[i]
		<-start
		var n int64
		for r := 0; r < rounds*8; r++ {
			if dir != "dtoh" {
				if err := d.HtoD(v.dbuf, v.host[:chunk], v.up); err != nil {
					v.setupError = err
					return
				}
				n += int64(chunk)
			}
			if dir != "htod" {
				if err := d.DtoH(v.host[chunk:], v.dbuf+DevPtr(chunk), v.down); err != nil {
					v.setupError = err
					return
				}
				n += int64(chunk)
			}
		}
		if err := d.Sync(v.up); err != nil {
			v.setupError = err
		}
		if err := d.Sync(v.down); err != nil {
			v.setupError = err
		}
		*moved = n
	}
	moved := make([]int64, k)
	start := make(chan struct{})
	ready := make(chan struct{}, k)
	for i := range k {
		wg.Add(1)
		go func() {
			defer wg.Done()
			setup(i)
			ready <- struct{}{}
			if devs[i].setupError == nil {
				work(i, start, &moved[i])
			}
			v := &devs[i]
			d.StreamDestroy(v.up)
			d.StreamDestroy(v.down)
			d.Free(v.dbuf)
			if v.free != nil {
				v.free()
			}
			runtime.UnlockOSThread()
		}()
	}
	for range k {
		<-ready
	}
	b.ResetTimer()
	close(start)
	wg.Wait()
	b.StopTimer()
	var total int64
	for i := range k {
		if devs[i].setupError != nil {
			b.Fatalf("GPU %d: %v", i, devs[i].setupError)
		}
		total += moved[i]
	}
	return total
}

// BenchmarkHostCopy is the host's own memory bandwidth at the engine's
// scale (memmove by T threads of 64 MiB each), the other ceiling: every
// byte a GPU reads from a client's memfd or writes into it crosses DRAM.
func BenchmarkHostCopy(b *testing.B) {
	const chunk = 64 << 20
	for _, t := range []int{1, 8, 32, runtime.NumCPU()} {
		b.Run(fmt.Sprintf("threads=%d", t), func(b *testing.B) {
			src := make([][]byte, t)
			dst := make([][]byte, t)
			for i := range t {
				src[i] = make([]byte, chunk)
				dst[i] = make([]byte, chunk)
				for j := 0; j < chunk; j += 4096 {
					src[i][j], dst[i][j] = 1, 1 // fault the pages in
				}
			}
			b.ResetTimer()
			var wg sync.WaitGroup
			for i := range t {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for r := 0; r < b.N*4; r++ {
						copy(dst[i], src[i])
					}
				}()
			}
			wg.Wait()
			b.ReportMetric(float64(int64(t)*int64(b.N)*4*chunk)/b.Elapsed().Seconds()/1e9, "GB/s")
			b.ReportMetric(0, "ns/op")
		})
	}
}
