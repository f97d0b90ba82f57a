// Package routing sends each batch of pages to the engine that is fastest
// for its size: the start-up calibration ranks the usable backends per
// batch size and direction, small concurrent batches are merged for an
// engine that wins on large ones, a batch whose memory the first engine
// is still making ready (backends.Warming) goes to the next, and a batch
// an engine fails is redone on the next, so no batch is lost to a GPU
// fault. It knows engines only through backends.Set: no engine is named
// here.
package routing

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/s4d-project/s4d/backends"
	"github.com/s4d-project/s4d/internal/par"
	"github.com/s4d-project/s4d/pagefmt"
)

// Router routes batches: Compress and Decompress are its two entries.
type Router struct {
	set       *backends.Set
	log       *slog.Logger
	codec     pagefmt.Codec
	pageSize  int
	threshold int
	cal       atomic.Pointer[Calibration]
	below     atomic.Int64 // coalesce batches smaller than this; 0 = never
	wait      time.Duration
	queue     chan *waiter   // small batches for the coalescer (coalesce.go)
	qmu       sync.RWMutex   // shared while a batch is handed to queue; Close takes it whole
	closed    bool           // under qmu: queue is closed, batches go alone
	groups    sync.WaitGroup // the coalescer and the merged batches it runs
	small     meter          // pages per second arriving in batches that could merge
	fallbacks atomic.Uint64
	inFlight  atomic.Int64 // batches being compressed or decompressed now
	progress  atomic.Int64 // unix nanoseconds of the last finished or first started batch
	loads     loads        // batches in flight per backend (place.go)
	memNode   func([]byte) int

	mu       sync.Mutex
	prefer   string // "auto" or a backend name
	ctr      map[ctrKey]*counters
	codecCal map[pagefmt.Codec]*Calibration // codec.go
	engines  map[string]string              // a device's engine, by the device's name (stats.go)
}

type ctrKey struct {
	backend string
	codec   pagefmt.Codec
	dir     string
}

type counters struct {
	batches, pages, in, out, errors atomic.Uint64
}

// Options configure a Router.
type Options struct {
	Prefer   string // "auto" (the best usable backend) or a backend's name
	Codec    pagefmt.Codec
	PageSize int
	Log      *slog.Logger
	// NodeOf tells the NUMA node of a batch's memory, for placing it on
	// the nearest device; nil asks the kernel (tests fake a topology).
	NodeOf func(mem []byte) int
}

// New routes batches over the backends of set.
func New(set *backends.Set, o Options) *Router {
	r := &Router{set: set, log: o.Log, codec: o.Codec, pageSize: o.PageSize, threshold: o.PageSize * 3 / 4,
		prefer: o.Prefer, ctr: map[ctrKey]*counters{}, memNode: o.NodeOf, engines: map[string]string{}}
	for _, be := range set.Usable() {
		if d, ok := be.(Device); ok {
			r.engines[be.Name()] = d.Engine()
		}
	}
	return r
}

// SetCalibration makes batch routing follow c and, if a large-batch
// backend beats the small-batch one, merges concurrent small batches,
// waiting at most wait for company (0: never merge).
func (r *Router) SetCalibration(c *Calibration, wait time.Duration) {
	r.cal.Store(c)
	below := c.CoalesceBelow()
	if wait <= 0 {
		below = 0
	}
	r.qmu.Lock()
	if below > 0 && r.queue == nil && !r.closed {
		r.wait = wait
		r.queue = make(chan *waiter, 1024)
		r.groups.Add(1)
		go r.coalesce(c.Sizes[len(c.Sizes)-1])
	}
	if r.closed {
		below = 0
	}
	r.qmu.Unlock()
	r.below.Store(int64(below))
}

// SetPreference changes the preferred backend for later batches.
func (r *Router) SetPreference(name string) {
	r.mu.Lock()
	r.prefer = name
	r.mu.Unlock()
}

// Preference is the backend asked for ("auto" or a name).
func (r *Router) Preference() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.prefer
}

// chain lists the backends to try for compressing a batch of n pages, best first.
func (r *Router) chain(n int) []backends.Backend { return r.chainFor(n, false) }

func (r *Router) chainFor(n int, decompress bool) []backends.Backend {
	usable := r.set.Usable()
	if len(usable) <= 1 {
		return usable // nothing to order
	}
	pref := r.Preference()
	if pref == "auto" {
		cal := r.cal.Load()
		if cal == nil {
			return usable
		}
		if decompress && len(cal.DecOrder) > 0 {
			return rank(usable, cal.DecOrder[cal.bucket(n)])
		}
		return rank(usable, cal.Order[cal.bucket(n)])
	}
	// The engine's name stands for all its devices.
	out := make([]backends.Backend, 0, len(usable))
	for _, b := range usable {
		if b.Name() == pref || engineOf(b) == pref {
			out = append(out, b)
		}
	}
	for _, b := range usable {
		if b.Name() != pref && engineOf(b) != pref {
			out = append(out, b)
		}
	}
	return out
}

// taking keeps the backends of chain that take pages of every codec at
// pageSize (backends.Limited), in order.
func taking(chain []backends.Backend, pageSize int, codecs ...pagefmt.Codec) []backends.Backend {
	takes := func(be backends.Backend) bool {
		for _, c := range codecs {
			if !backends.Takes(be, c, pageSize) {
				return false
			}
		}
		return true
	}
	if !slices.ContainsFunc(chain, func(be backends.Backend) bool { return !takes(be) }) {
		return chain // the usual case: nothing to leave out, nothing to allocate
	}
	return slices.DeleteFunc(slices.Clone(chain), func(be backends.Backend) bool { return !takes(be) })
}

// anyLimited tells whether a backend of chain takes only some batches.
func anyLimited(chain []backends.Backend) bool {
	return slices.ContainsFunc(chain, func(be backends.Backend) bool { _, ok := be.(backends.Limited); return ok })
}

// rank orders backends as names does; backends not named keep their order, last.
func rank(usable []backends.Backend, names []string) []backends.Backend {
	out := make([]backends.Backend, 0, len(usable))
	for _, n := range names {
		for _, b := range usable {
			if b.Name() == n {
				out = append(out, b)
			}
		}
	}
	for _, b := range usable {
		if !slices.Contains(names, b.Name()) {
			out = append(out, b)
		}
	}
	return out
}

// InUse is the backend the next large batch goes to.
func (r *Router) InUse() string {
	if c := taking(r.chain(1<<30), r.pageSize, r.codec); len(c) > 0 {
		return c[0].Name()
	}
	return ""
}

func (r *Router) counters(backend string, codec pagefmt.Codec, dir string) *counters {
	r.mu.Lock()
	defer r.mu.Unlock()
	k := ctrKey{backend, codec, dir}
	c := r.ctr[k]
	if c == nil {
		c = new(counters)
		r.ctr[k] = c
	}
	return c
}

var errNoBackend = errors.New("no usable backend")

// begin and end bracket a batch so Progress can tell a wedged backend.
func (r *Router) begin() {
	if r.inFlight.Add(1) == 1 {
		r.progress.Store(time.Now().UnixNano())
	}
}

func (r *Router) end() {
	r.progress.Store(time.Now().UnixNano())
	r.inFlight.Add(-1)
}

// Busy tells whether batches are being compressed or decompressed now.
func (r *Router) Busy() bool { return r.inFlight.Load() > 0 }

// Fallbacks counts batches moved to the next backend after a failure.
func (r *Router) Fallbacks() uint64 { return r.fallbacks.Load() }

// Calibration is what SetCalibration was given, or nil.
func (r *Router) Calibration() *Calibration { return r.cal.Load() }

// Progress fails when batches are in flight and none has finished for longer than limit.
func (r *Router) Progress(limit time.Duration) error {
	if r.inFlight.Load() == 0 {
		return nil
	}
	if since := time.Since(time.Unix(0, r.progress.Load())); since > limit {
		return fmt.Errorf("%d batches in flight, none finished for %v", r.inFlight.Load(), since.Round(time.Second))
	}
	return nil
}

// Deliver takes the results of pages [lo, lo+len(part.Class)) of a batch
// from the backend named, valid only during the call. A part may come with
// Place set instead of its bytes (pagefmt.Placer): the deliverer writes
// them with it (pagecache.Store.Put does), and returns Place's error as it
// is, for the batch to be redone on the next backend.
type Deliver func(backend string, lo int, part *pagefmt.Compressed) error

// Compress compresses b (PageSize and Pages set; Codec the codec asked
// for, 0 for the foreground's; Strong as wanted; the rest is filled in)
// and hands the results to deliver: part by part from a backend's own
// buffers where it finishes batches in parts (a GPU), else whole from out.
// With deliver nil the results are left whole in out.
// If the batch moves to another backend after a failure, that one delivers
// every page again. An error from deliver ends the batch and is returned
// as it is: the backend did not fail. It returns the backend that did it.
// A batch of another codec than the foreground's, or a strong one (a
// pool's own codec, the cold tier's recompression), is ranked by that
// codec's calibration and never merged with others.
func (r *Router) Compress(ctx context.Context, b *pagefmt.Batch, out *pagefmt.Compressed, deliver Deliver) (string, error) {
	if b.Codec != 0 && b.Codec != r.codec || b.Strong {
		codec := cmp.Or(b.Codec, r.codec)
		return r.compressWith(ctx, codec, r.chainAs(codec, b.Len()), b, out, deliver)
	}
	// Merge only when small batches arrive fast enough to fill a batch for
	// the large-batch backend within the wait; a lone client goes direct.
	if n, below := b.Len(), int(r.below.Load()); n < below && r.Preference() == "auto" &&
		r.small.add(n)*r.wait.Seconds() >= float64(below) {
		name, err := r.merge(ctx, b.Pages, out)
		if err == nil && deliver != nil {
			err = deliver(name, 0, out)
		}
		return name, err
	}
	return r.compressBatch(ctx, b, out, deliver)
}

// compressBatch runs a batch down the chain of backends.
func (r *Router) compressBatch(ctx context.Context, b *pagefmt.Batch, out *pagefmt.Compressed, deliver Deliver) (string, error) {
	return r.compressWith(ctx, r.codec, r.chain(b.Len()), b, out, deliver)
}

// compressWith runs a batch of codec down chain.
func (r *Router) compressWith(ctx context.Context, codec pagefmt.Codec, chain []backends.Backend, b *pagefmt.Batch, out *pagefmt.Compressed, deliver Deliver) (string, error) {
	r.begin()
	defer r.end()
	b.Codec, b.Threshold, b.Sums, b.Placed = codec, r.threshold, true, deliver != nil
	pages := b.Pages
	chain = r.place(ctx, taking(chain, b.PageSize, codec), pages)
	if r.Preference() == "auto" { // --backend webgpu: its staging copy rather than the CPU
		chain = warmFirst(chain, pages)
	}
	for i, be := range chain {
		if i > 0 {
			r.fallbacks.Add(1)
		}
		c := r.counters(be.Name(), codec, "compress")
		c.batches.Add(1)
		load := r.loads.of(be.Name())
		load.Add(1)
		stored, derr, err := r.run(ctx, be, b, out, deliver)
		load.Add(-1)
		if derr != nil {
			return be.Name(), derr
		}
		if err == nil {
			c.pages.Add(uint64(b.Len()))
			c.in.Add(uint64(len(pages)))
			c.out.Add(stored)
			return be.Name(), nil
		}
		c.errors.Add(1)
		if ctx.Err() != nil {
			return "", ctx.Err()
		}
		r.fail(be, err)
	}
	return "", errNoBackend
}

// run compresses b on be and delivers the results; it returns the bytes
// stored, deliver's error, and the backend's.
func (r *Router) run(ctx context.Context, be backends.Backend, b *pagefmt.Batch, out *pagefmt.Compressed, deliver Deliver) (stored uint64, derr, err error) {
	size := func(c *pagefmt.Compressed) {
		for _, s := range c.Size {
			stored += uint64(s)
		}
	}
	if pc, ok := be.(backends.PartCompressor); ok && deliver != nil {
		err = pc.CompressParts(ctx, b, func(lo int, part *pagefmt.Compressed) error {
			size(part)
			derr = deliver(be.Name(), lo, part)
			return derr
		})
		if pagefmt.IsPlaceError(derr) {
			derr = nil // the backend's failure, met while placing its part
		}
		if derr != nil {
			return 0, derr, nil
		}
		if err == nil {
			err = faultBackend(be.Name())
		}
		return stored, nil, err
	}
	if err = be.Compress(ctx, b, out); err == nil {
		err = faultBackend(be.Name())
	}
	if err != nil {
		return 0, nil, err
	}
	size(out)
	if deliver != nil {
		derr = deliver(be.Name(), 0, out)
	}
	return stored, derr, nil
}

// Decompress expands a batch of stored pages.
func (r *Router) Decompress(ctx context.Context, dd *pagefmt.Decompression) error {
	r.begin()
	defer r.end()
	check := dd.NeedsCheck()
	dd.Corrupt = dd.Corrupt[:0]
	if check {
		dd.Corrupt = pagefmt.Resize(dd.Corrupt, len(dd.Src))
		clear(dd.Corrupt)
	}
	chain := r.chainFor(len(dd.Src), true)
	if anyLimited(chain) { // only then is it worth a look at every page's class
		chain = taking(chain, dd.PageSize, dd.Codecs()...)
	}
	chain = r.place(ctx, chain, dd.Dst)
	for i, be := range chain {
		if i > 0 {
			r.fallbacks.Add(1)
		}
		if _, ok := be.(backends.SumChecker); check && !ok {
			checkSums(dd)
			check = false
		}
		c := r.counters(be.Name(), r.codec, "decompress")
		c.batches.Add(1)
		load := r.loads.of(be.Name())
		load.Add(1)
		err := be.Decompress(ctx, dd)
		load.Add(-1)
		if err == nil {
			err = faultBackend(be.Name())
		}
		if err == nil {
			for j, bad := range dd.Corrupt {
				dd.Failed[j] = dd.Failed[j] || bad
			}
			c.pages.Add(uint64(len(dd.Src)))
			for _, s := range dd.Src {
				c.in.Add(uint64(len(s.Data)))
			}
			c.out.Add(uint64(len(dd.Dst)))
			return nil
		}
		c.errors.Add(1)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		r.fail(be, err)
	}
	return errNoBackend
}

// fail takes a faulty backend out of service. The last resort (the CPU)
// is never taken out: its errors are per request.
func (r *Router) fail(be backends.Backend, err error) {
	r.log.Error("backend failed; batch goes to the next one", "backend", be.Name(), "err", err)
	if !r.set.LastResort(be.Name()) {
		r.set.MarkFailed(be.Name(), fmt.Errorf("runtime fault: %w", err))
	}
}

// checkSums checks, on the caller's cores, the pages a backend that does
// not check them is about to decode.
func checkSums(dd *pagefmt.Decompression) {
	par.For(len(dd.Src), 256, 0, dd.CheckSums)
}
