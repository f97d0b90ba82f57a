package daemon

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/s4d-project/s4d/backends"
	"github.com/s4d-project/s4d/backends/corpus"
)

// CalibrationSizes are the batch sizes, in pages, timed at start-up; the
// largest (64 MiB of 4 KiB pages) is where GPUs reach their stride, and a
// large GET is decoded fetchChunk pages at a time.
var CalibrationSizes = []int{1, 16, 256, fetchChunk, 4096, 16384}

// Calibration ranks the usable backends for each batch size: small batches
// often belong to the CPU, where a GPU would pay a PCIe round trip, and
// large ones to a GPU.
type Calibration struct {
	Sizes []int
	Order [][]string           // compression, per size, fastest first
	Rate  map[string][]float64 // compression GB/s per size
	// Decompression is timed with up to decodeCallers batches at once (a
	// GET at scale comes from many clients, and a GPU overlaps them), into
	// ordinary memory and, for backends that pin memory, into memory
	// pinned for them (a client's shared buffer on GET_FD); see rankDecode.
	DecOrder    [][]string
	DecRate     map[string][]float64 // GB/s per size
	DecCPU      map[string][]float64 // this process's CPU core-seconds per GB
	PinnedOrder [][]string
	PinnedRate  map[string][]float64 // as DecRate for backends that do not pin
	PinnedCPU   map[string][]float64
}

// decodeCallers is how many batches decode at once when timing
// decompression, as far as the largest size allows (calibration memory
// stays one largest batch).
const decodeCallers = 4

// Calibrate times every backend on heap-like pages (pointers and small
// integers: every page costs about the same, so sizes compare) at each
// size; each timing is the best of a few runs lasting 20 ms or more.
// Compression and decompression are ranked separately.
func Calibrate(ctx context.Context, usable []backends.Backend, pageSize int, codec backends.Codec, sizes []int) (*Calibration, error) {
	maxN := sizes[len(sizes)-1]
	pages := corpus.Pages(corpus.Pointers, maxN, pageSize, 42)
	plain := make([]byte, maxN*pageSize)
	c := &Calibration{Sizes: sizes, Rate: map[string][]float64{}, DecRate: map[string][]float64{}, DecCPU: map[string][]float64{},
		PinnedRate: map[string][]float64{}, PinnedCPU: map[string][]float64{}}
	var out backends.Compressed
	for _, be := range usable {
		b := &backends.Batch{PageSize: pageSize, Codec: codec, Threshold: pageSize * 3 / 4}
		name := be.Name()
		rates := make([]float64, len(sizes))
		c.DecRate[name], c.DecCPU[name] = make([]float64, len(sizes)), make([]float64, len(sizes))
		c.PinnedRate[name], c.PinnedCPU[name] = c.DecRate[name], c.DecCPU[name]
		pinned, unpin := pinnedBuffer(be, maxN*pageSize)
		if pinned != nil {
			defer unpin()
			c.PinnedRate[name], c.PinnedCPU[name] = make([]float64, len(sizes)), make([]float64, len(sizes))
		}
		for i, n := range sizes {
			b.Pages = pages[:n*pageSize]
			t, _, err := fastest(1, func(int) error { return be.Compress(ctx, b, &out) })
			if err != nil {
				return nil, fmt.Errorf("%s: %w", name, err)
			}
			rates[i] = float64(n*pageSize) / t.Seconds() / 1e9
			src := make([]backends.Stored, n)
			for j := range n {
				src[j] = backends.Stored{Class: out.Class[j], Fill: out.Fill[j], Data: out.Bytes(j, b)}
			}
			k := max(1, min(decodeCallers, maxN/n))
			decode := func(dst []byte) (rate, cpu float64, err error) {
				ds := make([]backends.Decompression, k)
				for g := range ds {
					ds[g] = backends.Decompression{PageSize: pageSize, Src: src, Dst: dst[g*n*pageSize : (g+1)*n*pageSize]}
				}
				t, cs, err := fastest(k, func(g int) error { return be.Decompress(ctx, &ds[g]) })
				gb := float64(k*n*pageSize) / 1e9
				return gb / t.Seconds(), cs / gb, err
			}
			if c.DecRate[name][i], c.DecCPU[name][i], err = decode(plain); err != nil {
				return nil, fmt.Errorf("%s: %w", name, err)
			}
			if pinned != nil {
				if c.PinnedRate[name][i], c.PinnedCPU[name][i], err = decode(pinned); err != nil {
					return nil, fmt.Errorf("%s: %w", name, err)
				}
			}
		}
		c.Rate[name] = rates
	}
	c.Order = rankBy(usable, c.Rate, len(sizes))
	c.DecOrder = rankDecode(usable, c.DecRate, c.DecCPU, len(sizes))
	c.PinnedOrder = rankDecode(usable, c.PinnedRate, c.PinnedCPU, len(sizes))
	return c, nil
}

// pinnedBuffer maps n bytes and pins them for be, if it pins memory and
// can; nil otherwise. unpin undoes both.
func pinnedBuffer(be backends.Backend, n int) (mem []byte, unpin func()) {
	p, ok := be.(backends.Pinner)
	if !ok {
		return nil, nil
	}
	mem, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_POPULATE)
	if err != nil {
		return nil, nil
	}
	release, err := p.Pin(mem)
	if err != nil {
		unix.Munmap(mem)
		return nil, nil
	}
	return mem, func() {
		release()
		unix.Munmap(mem)
	}
}

// Near ties in decompression go to the backend that leaves the CPU to the
// applications: one at least nearTie as fast as the fastest, at most
// cpuShare of its CPU per GB, comes first. Through the daemon the CPU so
// freed also serves the rest of each GET (lookups, checksums): on the
// H100 host with 8 clients of 64 MiB GETs into shared buffers, GPU
// decoding gave 33.5-38.9 GB/s at 0.28 daemon core-s per GB, CPU decoding
// 30.3-34.8 GB/s at 0.41-0.49, though the CPU decoded faster alone.
const (
	nearTie  = 0.75
	cpuShare = 0.5
)

// rankDecode orders the backends by decompression rate for every size,
// then puts first the near tie using the least CPU, if any.
func rankDecode(usable []backends.Backend, rate, cpu map[string][]float64, sizes int) [][]string {
	order := rankBy(usable, rate, sizes)
	for i, names := range order {
		best, pick := names[0], -1
		for j, n := range names[1:] {
			if rate[n][i] >= nearTie*rate[best][i] && cpu[n][i] <= cpuShare*cpu[best][i] &&
				(pick < 0 || cpu[n][i] < cpu[names[pick]][i]) {
				pick = j + 1
			}
		}
		if pick > 0 {
			p := names[pick]
			copy(names[1:pick+1], names[:pick])
			names[0] = p
		}
	}
	return order
}

// fastest runs fn on `callers` goroutines at once (fn gets the caller's
// number), once to warm up, then at least 3 times and for at least 20 ms,
// and returns the best time and this process's CPU time during that run.
func fastest(callers int, fn func(int) error) (time.Duration, float64, error) {
	run := func() error {
		if callers == 1 {
			return fn(0)
		}
		errs := make(chan error, callers)
		for g := range callers {
			go func() { errs <- fn(g) }()
		}
		var first error
		for range callers {
			if err := <-errs; err != nil && first == nil {
				first = err
			}
		}
		return first
	}
	if err := run(); err != nil {
		return 0, 0, err
	}
	best, bestCPU := time.Duration(1<<62), 0.0
	var spent time.Duration
	for i := 0; i < 3 || (spent < 20*time.Millisecond && i < 50); i++ {
		c0, t0 := processCPU(), time.Now()
		if err := run(); err != nil {
			return 0, 0, err
		}
		el := time.Since(t0)
		spent += el
		if el < best {
			best, bestCPU = el, processCPU()-c0
		}
	}
	return best, bestCPU, nil
}

// processCPU is this process's user and system CPU time, in seconds.
func processCPU() float64 {
	var ru unix.Rusage
	if unix.Getrusage(unix.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}

// rankBy orders the backends by rate, fastest first, for every size.
func rankBy(usable []backends.Backend, rate map[string][]float64, sizes int) [][]string {
	var order [][]string
	for i := range sizes {
		var names []string
		for _, be := range usable {
			names = append(names, be.Name())
		}
		sort.SliceStable(names, func(a, b int) bool { return rate[names[a]][i] > rate[names[b]][i] })
		order = append(order, names)
	}
	return order
}

// bucket is the index of the largest calibrated size not above n.
func (c *Calibration) bucket(n int) int {
	i := 0
	for j, s := range c.Sizes {
		if s <= n {
			i = j
		}
	}
	return i
}

// coalesceBelow is the batch size under which requests should be merged:
// the smallest size at which the large-batch winner already wins. It is 0
// when one backend wins everywhere, and merging would only add latency.
func (c *Calibration) coalesceBelow() int {
	last := len(c.Sizes) - 1
	winner := c.Order[last][0]
	if c.Order[0][0] == winner {
		return 0
	}
	for i, o := range c.Order {
		if o[0] == winner {
			return c.Sizes[i]
		}
	}
	return 0
}

func (c *Calibration) String() string {
	var b strings.Builder
	for name, r := range c.Rate {
		fmt.Fprintf(&b, "%s:", name)
		for i, s := range c.Sizes {
			fmt.Fprintf(&b, " %d=%.2f/%.2f", s, r[i], c.DecRate[name][i])
			if p := c.PinnedRate[name]; len(p) > i && &p[0] != &c.DecRate[name][0] {
				fmt.Fprintf(&b, "/%.2f", p[i])
			}
		}
		b.WriteString(" GB/s")
		b.WriteString("; ")
	}
	return "compress/decompress[/into pinned memory] " + strings.TrimSuffix(b.String(), "; ")
}
