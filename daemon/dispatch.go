package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/s4d-project/s4d/backends"
	"github.com/s4d-project/s4d/ipc"
)

// Dispatcher sends each batch to the backend that is fastest for its size
// (or the one asked for), merges small concurrent batches when a backend
// that wins on large ones is present, and when a backend fails, takes it
// out of service and redoes the batch on the next one, ending with the
// CPU, so no batch is lost to a GPU fault.
type Dispatcher struct {
	set       *backends.Set
	log       *slog.Logger
	codec     backends.Codec
	pageSize  int
	threshold int
	cal       atomic.Pointer[Calibration]
	below     atomic.Int64 // coalesce batches smaller than this; 0 = never
	wait      time.Duration
	queue     chan *waiter
	small     meter // pages per second arriving in batches that could merge
	fallbacks atomic.Uint64
	inFlight  atomic.Int64
	progress  atomic.Int64 // unix nanoseconds of the last finished or first started batch

	mu     sync.Mutex
	prefer string // "auto" or a backend name
	ctr    map[ctrKey]*counters
}

type ctrKey struct {
	backend string
	codec   backends.Codec
	dir     string
}

type counters struct {
	batches, pages, in, out, errors atomic.Uint64
}

// NewDispatcher prefers the named backend ("auto": the best one usable).
func NewDispatcher(set *backends.Set, prefer string, codec backends.Codec, pageSize int, log *slog.Logger) *Dispatcher {
	return &Dispatcher{set: set, log: log, codec: codec, pageSize: pageSize, threshold: pageSize * 3 / 4,
		prefer: prefer, ctr: map[ctrKey]*counters{}}
}

// SetCalibration makes batch routing follow c and, if a large-batch
// backend beats the small-batch one, merges concurrent small batches,
// waiting at most wait for company (0: never merge).
func (d *Dispatcher) SetCalibration(c *Calibration, wait time.Duration) {
	d.cal.Store(c)
	below := c.coalesceBelow()
	if wait <= 0 {
		below = 0
	}
	d.mu.Lock()
	if below > 0 && d.queue == nil {
		d.wait = wait
		d.queue = make(chan *waiter, 1024)
		go d.coalesce(c.Sizes[len(c.Sizes)-1])
	}
	d.mu.Unlock()
	d.below.Store(int64(below))
}

// SetPreference changes the preferred backend for later batches.
func (d *Dispatcher) SetPreference(name string) {
	d.mu.Lock()
	d.prefer = name
	d.mu.Unlock()
}

// Preference is the backend asked for ("auto" or a name).
func (d *Dispatcher) Preference() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.prefer
}

// chain lists the backends to try for compressing a batch of n pages, best first.
func (d *Dispatcher) chain(n int) []backends.Backend { return d.chainFor(n, false) }

func (d *Dispatcher) chainFor(n int, decompress bool) []backends.Backend {
	usable := d.set.Usable()
	if len(usable) <= 1 {
		return usable // nothing to order
	}
	pref := d.Preference()
	if pref == "auto" {
		cal := d.cal.Load()
		if cal == nil {
			return usable
		}
		if decompress && len(cal.DecOrder) > 0 {
			return rank(usable, cal.DecOrder[cal.bucket(n)])
		}
		return rank(usable, cal.Order[cal.bucket(n)])
	}
	out := make([]backends.Backend, 0, len(usable))
	for _, b := range usable {
		if b.Name() == pref {
			out = append(out, b)
		}
	}
	for _, b := range usable {
		if b.Name() != pref {
			out = append(out, b)
		}
	}
	return out
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
		if !contains(names, b.Name()) {
			out = append(out, b)
		}
	}
	return out
}

// InUse is the backend the next large batch goes to.
func (d *Dispatcher) InUse() string {
	if c := d.chain(1 << 30); len(c) > 0 {
		return c[0].Name()
	}
	return ""
}

func (d *Dispatcher) counters(backend string, codec backends.Codec, dir string) *counters {
	d.mu.Lock()
	defer d.mu.Unlock()
	k := ctrKey{backend, codec, dir}
	c := d.ctr[k]
	if c == nil {
		c = new(counters)
		d.ctr[k] = c
	}
	return c
}

var errNoBackend = errors.New("no usable backend")

// begin and end bracket a batch so Progress can tell a wedged backend.
func (d *Dispatcher) begin() {
	if d.inFlight.Add(1) == 1 {
		d.progress.Store(time.Now().UnixNano())
	}
}

func (d *Dispatcher) end() {
	d.progress.Store(time.Now().UnixNano())
	d.inFlight.Add(-1)
}

// Progress fails when batches are in flight and none has finished for longer than limit.
func (d *Dispatcher) Progress(limit time.Duration) error {
	if d.inFlight.Load() == 0 {
		return nil
	}
	if since := time.Since(time.Unix(0, d.progress.Load())); since > limit {
		return fmt.Errorf("%d batches in flight, none finished for %v", d.inFlight.Load(), since.Round(time.Second))
	}
	return nil
}

// Compress compresses a batch and says which backend did it.
func (d *Dispatcher) Compress(ctx context.Context, pageSize int, pages []byte, out *backends.Compressed) (string, error) {
	// Merge only when small batches arrive fast enough to fill a batch for
	// the large-batch backend within the wait; a lone client goes direct.
	if n, below := len(pages)/pageSize, int(d.below.Load()); n < below && d.Preference() == "auto" &&
		d.small.add(n)*d.wait.Seconds() >= float64(below) {
		return d.merge(ctx, pages, out)
	}
	return d.compress(ctx, pageSize, pages, out)
}

// CompressBatch is Compress for a Batch the caller holds and reuses
// (PageSize and Pages set; the rest is filled in).
func (d *Dispatcher) CompressBatch(ctx context.Context, b *backends.Batch, out *backends.Compressed) (string, error) {
	return d.CompressTo(ctx, b, out, nil)
}

// Deliver takes the results of pages [lo, lo+len(part.Class)) of a batch
// from the backend named, valid only during the call.
type Deliver func(backend string, lo int, part *backends.Compressed) error

// CompressTo is CompressBatch handing the results to deliver: part by part
// from a backend's own buffers where it finishes batches in parts (a GPU),
// else whole from out. If the batch moves to another backend after a
// failure, that one delivers every page again. An error from deliver ends
// the batch and is returned as it is: the backend did not fail.
func (d *Dispatcher) CompressTo(ctx context.Context, b *backends.Batch, out *backends.Compressed, deliver Deliver) (string, error) {
	if n, below := b.Len(), int(d.below.Load()); n < below && d.Preference() == "auto" &&
		d.small.add(n)*d.wait.Seconds() >= float64(below) {
		name, err := d.merge(ctx, b.Pages, out)
		if err == nil && deliver != nil {
			err = deliver(name, 0, out)
		}
		return name, err
	}
	return d.compressBatch(ctx, b, out, deliver)
}

func (d *Dispatcher) compress(ctx context.Context, pageSize int, pages []byte, out *backends.Compressed) (string, error) {
	b := &backends.Batch{PageSize: pageSize, Pages: pages}
	return d.compressBatch(ctx, b, out, nil)
}

// compressBatch is compress for a Batch the caller holds (PageSize and
// Pages set): a connection passes its own, so a request allocates none.
func (d *Dispatcher) compressBatch(ctx context.Context, b *backends.Batch, out *backends.Compressed, deliver Deliver) (string, error) {
	d.begin()
	defer d.end()
	b.Codec, b.Threshold, b.Sums = d.codec, d.threshold, true
	pages := b.Pages
	for i, be := range d.chain(b.Len()) {
		if i > 0 {
			d.fallbacks.Add(1)
		}
		c := d.counters(be.Name(), d.codec, "compress")
		c.batches.Add(1)
		stored, derr, err := d.run(ctx, be, b, out, deliver)
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
		d.fail(be, err)
	}
	return "", errNoBackend
}

// run compresses b on be and delivers the results; it returns the bytes
// stored, deliver's error, and the backend's.
func (d *Dispatcher) run(ctx context.Context, be backends.Backend, b *backends.Batch, out *backends.Compressed, deliver Deliver) (stored uint64, derr, err error) {
	size := func(c *backends.Compressed) {
		for _, s := range c.Size {
			stored += uint64(s)
		}
	}
	if pc, ok := be.(backends.PartCompressor); ok && deliver != nil {
		err = pc.CompressParts(ctx, b, func(lo int, part *backends.Compressed) error {
			size(part)
			derr = deliver(be.Name(), lo, part)
			return derr
		})
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
func (d *Dispatcher) Decompress(ctx context.Context, dd *backends.Decompression) error {
	d.begin()
	defer d.end()
	for i, be := range d.chainFor(len(dd.Src), true) {
		if i > 0 {
			d.fallbacks.Add(1)
		}
		c := d.counters(be.Name(), d.codec, "decompress")
		c.batches.Add(1)
		err := be.Decompress(ctx, dd)
		if err == nil {
			err = faultBackend(be.Name())
		}
		if err == nil {
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
		d.fail(be, err)
	}
	return errNoBackend
}

// fail takes a faulty backend out of service. The CPU backend is never
// taken out: it is the last resort, and its errors are per request.
func (d *Dispatcher) fail(be backends.Backend, err error) {
	d.log.Error("backend failed; batch goes to the next one", "backend", be.Name(), "err", err)
	if be.Name() != "cpu" {
		d.set.MarkFailed(be.Name(), fmt.Errorf("runtime fault: %w", err))
	}
}

// Stats reports every backend with its counters.
func (d *Dispatcher) Stats() []ipc.BackendStats {
	inUse := d.InUse()
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []ipc.BackendStats
	for _, st := range d.set.Statuses() {
		bs := ipc.BackendStats{Name: st.Name, State: string(st.State), Reason: st.Reason,
			Describe: st.Describe, InUse: st.Name == inUse}
		for _, dir := range []string{"compress", "decompress"} {
			for _, codec := range []backends.Codec{backends.CodecLZ4, backends.CodecZstd} {
				c := d.ctr[ctrKey{st.Name, codec, dir}]
				if c == nil {
					continue
				}
				bs.Counters = append(bs.Counters, ipc.CodecCounters{Codec: codec.String(), Direction: dir,
					Batches: c.batches.Load(), Pages: c.pages.Load(), BytesIn: c.in.Load(),
					BytesOut: c.out.Load(), Errors: c.errors.Load()})
			}
		}
		out = append(out, bs)
	}
	return out
}
