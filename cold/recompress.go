package cold

// Recompression: idle and huge pages compressed again with a stronger
// codec, so that memory the foreground does not touch holds fewer bytes.

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/s4d-project/s4d/pagecache"
	"github.com/s4d-project/s4d/pagefmt"
	"github.com/s4d-project/s4d/routing"
)

// Recompressor recompresses pages with zstd at a strong level, through
// the router (so on whichever engine its calibration for zstd ranks
// first), one bounded batch at a time, waiting while the foreground is
// busy. A page is kept in its new form only when that saves MinSaving of
// its stored bytes, and only if no write came in meanwhile.
type Recompressor struct {
	Store     Pages
	Router    Compressor
	MinSaving float64     // fraction of a page's stored bytes to save, or the page stays as it is
	Batch     int         // pages per batch; 0: routing.DecodeChunk
	Busy      func() bool // whether foreground requests are being served; nil: never
	Log       *slog.Logger

	mu    sync.Mutex // one job at a time
	calib sync.Once
	buf   scratch // the running job's, under mu

	runs, tried, kept, changed, before, saved, in, nanos atomic.Uint64
	backend                                              atomic.Pointer[string]
}

// Result is what a job did, or (Stats) all jobs since the start.
type Result struct {
	Runs         uint64  // jobs run (Stats only)
	PagesTried   uint64  // read and compressed again
	PagesKept    uint64  // replaced by their smaller form
	PagesChanged uint64  // written or deleted meanwhile: the newer write kept
	BytesBefore  uint64  // stored bytes of the pages recompressed, before
	BytesSaved   uint64  // stored bytes those pages no longer take
	BytesIn      uint64  // bytes of pages compressed again
	Seconds      float64 // time spent
	Backend      string  // the engine of the last batch
}

// Job says which pages to recompress.
type Job struct {
	UID    uint32 // pages of this user's pools; 0: every user's
	Pool   string // one pool; "": every pool (of UID)
	Idle   bool   // pages idle for at least MinAge epochs
	MinAge int
	Huge   bool // pages stored raw, whatever their age
}

// scan is how many pages one walk of the index picks: each walk visits
// every page of the pools chosen, so it picks many at a time.
const scan = 1 << 16

// busyWait bounds how long a batch waits for the foreground to be quiet:
// under constant load the job still moves, a batch at a time.
const busyWait = 250 * time.Millisecond

// ErrRunning is returned by TryRun while another job runs.
var ErrRunning = errors.New("a recompression is already running")

// Run recompresses the pages job chooses, after any job running now.
func (r *Recompressor) Run(ctx context.Context, job Job) (Result, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.run(ctx, job)
}

// TryRun is Run, unless a job is running already (ErrRunning).
func (r *Recompressor) TryRun(ctx context.Context, job Job) (Result, error) {
	if !r.mu.TryLock() {
		return Result{}, ErrRunning
	}
	defer r.mu.Unlock()
	return r.run(ctx, job)
}

func (r *Recompressor) run(ctx context.Context, job Job) (res Result, err error) {
	t0 := time.Now()
	defer func() {
		res.Seconds = time.Since(t0).Seconds()
		r.runs.Add(1)
		r.nanos.Add(uint64(time.Since(t0)))
	}()
	r.calibrate(ctx)
	want := func(p *pagecache.PageRef) bool {
		if p.Tried() || p.OnFile() {
			return false
		}
		switch p.Class {
		case pagefmt.ClassRaw:
			return job.Huge || job.Idle && p.Age >= job.MinAge
		case pagefmt.ClassLZ4, pagefmt.ClassZstd:
			return job.Idle && p.Age >= job.MinAge
		}
		return false // zero and same-filled pages hold nothing to shrink
	}
	for {
		var refs []pagecache.PageRef
		if refs, err = r.Store.Coldest(scan, pagecache.ColdFilter{UID: job.UID, Pool: job.Pool, Want: want}); err != nil {
			return res, err
		}
		done := res.PagesTried + res.PagesChanged
		for lo := 0; lo < len(refs); lo += r.batchSize() {
			r.waitQuiet(ctx)
			if err := ctx.Err(); err != nil {
				return res, err
			}
			if err := r.batch(ctx, refs[lo:min(lo+r.batchSize(), len(refs))], &res); err != nil {
				return res, err
			}
		}
		// Done when a walk found fewer than it could take, or nothing it
		// found was left as it was (pages rewritten as fast as picked).
		if len(refs) < scan || res.PagesTried+res.PagesChanged == done {
			return res, nil
		}
	}
}

func (r *Recompressor) batchSize() int {
	if r.Batch > 0 {
		return r.Batch
	}
	return routing.DecodeChunk
}

// calibrate ranks the engines for strong zstd batches once, when there is
// a choice: the start-up calibration timed the foreground's codec only.
func (r *Recompressor) calibrate(ctx context.Context) {
	r.calib.Do(func() {
		if r.Router.CodecCalibration(pagefmt.CodecZstd) != nil {
			return
		}
		if usable := r.Router.Usable(); len(usable) > 1 {
			cal, err := routing.CalibrateAs(ctx, usable, r.Store.PageSize(), pagefmt.CodecZstd, true, []int{r.batchSize()})
			switch {
			case err == nil:
				r.Router.SetCodecCalibration(pagefmt.CodecZstd, cal)
				r.log().Info("calibrated for recompression (strong zstd)", "rates", cal.String())
			case ctx.Err() == nil:
				r.log().Warn("calibration for recompression failed; using backends in preference order", "err", err)
			}
		}
	})
}

func (r *Recompressor) log() *slog.Logger {
	if r.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return r.Log
}

// waitQuiet waits, up to busyWait, while the foreground is busy.
func (r *Recompressor) waitQuiet(ctx context.Context) {
	if r.Busy == nil {
		return
	}
	for deadline := time.Now().Add(busyWait); r.Busy() && time.Now().Before(deadline) && ctx.Err() == nil; {
		time.Sleep(time.Millisecond)
	}
}

// scratch is what a batch works in, reused by the next.
type scratch struct {
	ok     []bool
	keep   []bool
	stored []pagefmt.Stored
	src    []pagefmt.Stored
	raw    []byte
	pages  []byte
	out    pagefmt.Compressed
	dd     pagefmt.Decompression
}

// batch recompresses refs and keeps what shrank enough.
func (r *Recompressor) batch(ctx context.Context, refs []pagecache.PageRef, res *Result) error {
	s, ps := &r.buf, r.Store.PageSize()
	n := len(refs)
	s.ok = pagefmt.Resize(s.ok, n)
	s.stored, s.raw = r.Store.ReadRefs(refs, s.raw, s.stored, s.ok)
	// Only pages still as found, read back whole, go on.
	live := make([]pagecache.PageRef, 0, n)
	s.src = s.src[:0]
	for i := range refs {
		if s.ok[i] {
			live = append(live, refs[i])
			s.src = append(s.src, s.stored[i])
		} else {
			res.PagesChanged++
			r.changed.Add(1)
		}
	}
	if len(live) == 0 {
		return nil
	}
	n = len(live)
	s.pages = pagefmt.Resize(s.pages, n*ps)
	s.dd = pagefmt.Decompression{PageSize: ps, Src: s.src, Dst: s.pages, Failed: s.dd.Failed}
	if err := r.Router.Decompress(ctx, &s.dd); err != nil {
		return err
	}
	b := &pagefmt.Batch{PageSize: ps, Pages: s.pages, Codec: pagefmt.CodecZstd, Strong: true}
	name, err := r.Router.Compress(ctx, b, &s.out, nil)
	if err != nil {
		return err
	}
	r.backend.Store(&name)
	res.Backend = name
	s.keep = pagefmt.Resize(s.keep, n)
	for i := range live {
		s.keep[i] = !s.dd.Failed[i] && s.out.Class[i] == pagefmt.ClassZstd &&
			float64(s.out.Size[i]) <= float64(live[i].Size)*(1-r.MinSaving)
	}
	got := r.Store.Replace(live, b, &s.out, r.Store.BackendID(name), s.keep)
	tried := uint64(n - got.Changed)
	res.PagesTried += tried
	res.PagesKept += uint64(got.Pages)
	res.PagesChanged += uint64(got.Changed)
	res.BytesBefore += got.Before
	res.BytesSaved += got.Before - got.After
	res.BytesIn += uint64(n * ps)
	r.tried.Add(tried)
	r.kept.Add(uint64(got.Pages))
	r.changed.Add(uint64(got.Changed))
	r.before.Add(got.Before)
	r.saved.Add(got.Before - got.After)
	r.in.Add(uint64(n * ps))
	return nil
}

// Stats are the totals since the start.
func (r *Recompressor) Stats() Result {
	st := Result{Runs: r.runs.Load(), PagesTried: r.tried.Load(), PagesKept: r.kept.Load(),
		PagesChanged: r.changed.Load(), BytesBefore: r.before.Load(), BytesSaved: r.saved.Load(),
		BytesIn: r.in.Load(), Seconds: time.Duration(r.nanos.Load()).Seconds()}
	if b := r.backend.Load(); b != nil {
		st.Backend = *b
	}
	return st
}
