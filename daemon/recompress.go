package daemon

import (
	"context"
	"sort"
	"sync"
	"time"

	"github.com/s4d-project/s4d/cold"
	"github.com/s4d-project/s4d/ipc"
	"github.com/s4d-project/s4d/pagecache"
)

// The cold tier in the daemon: page ages advance once an idle epoch;
// recompression runs when asked (RECOMPRESS) and, with recompress-every
// set, on its own, in a goroutine of its own that waits while requests
// are being served; IDLE counts, lists and marks idle pages.

// coldState is the daemon's part of the cold tier.
type coldState struct {
	once   sync.Once
	rc     *cold.Recompressor
	ctx    context.Context // ends when the daemon starts stopping
	cancel context.CancelFunc
	jobs   sync.WaitGroup // background jobs and the loop
}

func (d *Daemon) coldInit() *coldState {
	d.cold.once.Do(func() {
		d.cold.rc = &cold.Recompressor{Store: d.store, Router: d.disp,
			MinSaving: float64(d.cfg.RecompressMinSaving) / 100, Busy: d.disp.Busy, Log: d.log}
		d.cold.ctx, d.cold.cancel = context.WithCancel(context.Background())
	})
	return &d.cold
}

// startCold runs the epoch clock and the periodic recompression until
// stopCold.
func (d *Daemon) startCold() {
	cs := d.coldInit()
	cs.jobs.Add(1)
	go func() {
		defer cs.jobs.Done()
		epoch := time.NewTicker(d.cfg.IdleEpoch)
		defer epoch.Stop()
		var every <-chan time.Time
		if d.cfg.RecompressEvery > 0 {
			t := time.NewTicker(d.cfg.RecompressEvery)
			defer t.Stop()
			every = t.C
		}
		for {
			select {
			case <-cs.ctx.Done():
				return
			case <-epoch.C:
				d.store.AgeTick()
			case <-every:
				job := cold.Job{Idle: true, MinAge: d.ageOf(d.cfg.RecompressIdle), Huge: d.cfg.RecompressHuge}
				cs.jobs.Add(1)
				go func() {
					defer cs.jobs.Done()
					res, err := cs.rc.TryRun(cs.ctx, job)
					if err == nil && res.PagesTried > 0 {
						d.log.Info("recompressed", "pages_tried", res.PagesTried, "pages_recompressed", res.PagesKept,
							"bytes_saved", res.BytesSaved, "seconds", res.Seconds, "backend", res.Backend)
					} else if err != nil && err != cold.ErrRunning && cs.ctx.Err() == nil {
						d.log.Warn("recompression", "err", err)
					}
				}()
			}
		}
	}()
}

// stopCold ends the cold tier's work and waits for it: a job stops after
// its batch in flight, before the backends close.
func (d *Daemon) stopCold() {
	cs := d.coldInit()
	cs.cancel()
	cs.jobs.Wait()
}

// ageOf is the age, in epochs, of pages left untouched for at least t:
// an age counts whole epochs begun since the last use, so one more.
func (d *Daemon) ageOf(t time.Duration) int {
	if t <= 0 {
		return 0
	}
	return min(int((t+d.cfg.IdleEpoch-1)/d.cfg.IdleEpoch)+1, pagecache.MaxAge)
}

// checkAge refuses an age the epochs cannot tell.
func (d *Daemon) checkAge(t time.Duration) error {
	if longest := time.Duration(pagecache.MaxAge-1) * d.cfg.IdleEpoch; t > longest {
		return errorf(ipc.CodeMalformed, "age %v: ages are told up to %v (63 idle epochs of %v); set a longer idle-epoch", t, longest, d.cfg.IdleEpoch)
	}
	return nil
}

func (c *conn) idle(body []byte) ([]byte, error) {
	req, err := ipc.DecodeIdleRequest(body)
	if err != nil {
		return nil, &ipc.Error{Code: ipc.CodeMalformed, Msg: err.Error()}
	}
	if req.Pool != "" && !ipc.ValidPool(req.Pool) {
		return nil, errorf(ipc.CodeBadPool, "pool name %q: want 1-%d printable characters, no spaces", req.Pool, ipc.MaxPoolName)
	}
	if err := c.d.checkAge(req.MinAge); err != nil {
		return nil, err
	}
	st := c.d.store
	age := c.d.ageOf(req.MinAge)
	out := ipc.IdleResult{EpochSeconds: c.d.cfg.IdleEpoch.Seconds(), MinAgeEpochs: age, Pools: []ipc.IdlePool{}}
	if req.Flags&ipc.IdleMark != 0 {
		if out.Marked, err = st.MarkIdle(c.uid, req.Pool); err != nil {
			return nil, storeErr(err, req.Pool)
		}
	}
	infos, err := st.Idle(c.uid, req.Pool)
	if err != nil {
		return nil, storeErr(err, req.Pool)
	}
	for i := range infos {
		all, _ := infos[i].Older(0)
		pages, bytes := infos[i].Older(age)
		out.Pools = append(out.Pools, ipc.IdlePool{Name: infos[i].Pool, UID: infos[i].UID, Pages: all, IdlePages: pages, IdleBytes: bytes})
	}
	sort.Slice(out.Pools, func(i, j int) bool { return out.Pools[i].Name < out.Pools[j].Name })
	if req.List > 0 {
		refs, err := st.Coldest(int(min(req.List, maxIdleList)), pagecache.ColdFilter{UID: c.uid, Pool: req.Pool, MinAge: age})
		if err != nil {
			return nil, storeErr(err, req.Pool)
		}
		for _, r := range refs {
			out.Pages = append(out.Pages, ipc.IdlePage{Pool: r.Pool, Key: r.Key, AgeEpochs: r.Age, Class: r.Class.String(), Size: r.Size})
		}
	}
	return c.jsonBody(out)
}

// maxIdleList bounds the pages IDLE lists, and so its answer's size.
const maxIdleList = 1 << 16

// recompress runs a recompression job for the caller's pages and answers
// with what it did. The connection waits for it; other requests do not.
func (c *conn) recompress(body []byte) ([]byte, error) {
	req, err := ipc.DecodeRecompressRequest(body)
	if err != nil {
		return nil, &ipc.Error{Code: ipc.CodeMalformed, Msg: err.Error()}
	}
	if req.Pool != "" && !ipc.ValidPool(req.Pool) {
		return nil, errorf(ipc.CodeBadPool, "pool name %q: want 1-%d printable characters, no spaces", req.Pool, ipc.MaxPoolName)
	}
	if err := c.d.checkAge(req.MinAge); err != nil {
		return nil, err
	}
	cs := c.d.coldInit()
	job := cold.Job{UID: c.uid, Pool: req.Pool, Idle: req.Flags&ipc.RecompressIdle != 0,
		MinAge: c.d.ageOf(req.MinAge), Huge: req.Flags&ipc.RecompressHuge != 0}
	res, err := cs.rc.Run(cs.ctx, job)
	switch {
	case err == pagecache.ErrNoPool || err == pagecache.ErrPermission:
		return nil, storeErr(err, req.Pool)
	case err != nil && cs.ctx.Err() != nil:
		return nil, errorf(ipc.CodeShuttingDown, "recompression stopped: the daemon is stopping")
	case err != nil:
		return nil, errorf(ipc.CodeFailed, "recompression: %v", err)
	}
	c.d.log.Info("recompressed", "uid", c.uid, "pool", req.Pool, "pages_tried", res.PagesTried,
		"pages_recompressed", res.PagesKept, "bytes_saved", res.BytesSaved, "seconds", res.Seconds)
	return c.jsonBody(res)
}

// recompressStats is STATS's recompress section.
func (d *Daemon) recompressStats() *ipc.RecompressStats { return d.coldInit().rc.Stats() }
