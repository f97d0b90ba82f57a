package cold

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/s4d-project/s4d/backing"
	"github.com/s4d-project/s4d/pagecache"
	"github.com/s4d-project/s4d/settings"
)

// Tier is the cold tier's background work beside a daemon's store: page
// ages advance once an idle epoch; recompression runs on its own every
// RecompressEvery, in a goroutine that waits while requests are served;
// with a backing file, WritebackHeadroom percent of the limit is kept
// free ahead of the PUTs, checkpoints are taken, and at the end every
// page is persisted.
type Tier struct {
	// Recompressor runs every recompression, asked for or periodic.
	Recompressor *Recompressor

	cfg    settings.Config // a copy: what it reads takes effect at a restart only
	store  Store
	log    *slog.Logger
	file   *fileLevel      // nil without a backing file
	remote *remoteLevel    // the level below the file, if any (remote.go)
	ctx    context.Context // ends when Stop begins
	cancel context.CancelFunc
	jobs   sync.WaitGroup // the clock and recompressions
	stop   chan struct{}  // ends the file's jobs
	fileWG sync.WaitGroup
	seq    uint64 // the file's checkpoint number at Open, then at Close
}

// Open opens the backing file cfg names, if any, and with Persist
// restores every page its last checkpoint recorded, so that a daemon says
// it is ready only once they are back. busy says whether foreground
// requests are being served.
func Open(cfg *settings.Config, store Store, router Compressor, busy func() bool, log *slog.Logger, opts ...Option) (*Tier, error) {
	t := &Tier{cfg: *cfg, store: store, log: log, stop: make(chan struct{})}
	for _, o := range opts {
		o(t)
	}
	t.Recompressor = &Recompressor{Store: store, Router: router,
		MinSaving: float64(cfg.RecompressMinSaving) / 100, Busy: busy, Log: log}
	t.ctx, t.cancel = context.WithCancel(context.Background())
	if cfg.BackingFile == "" {
		if t.remote != nil {
			return nil, fmt.Errorf("the remote tier is the level below the backing file: set --backing-file too")
		}
		return t, nil
	}
	t0 := time.Now()
	f, idx, err := backing.Open(cfg.BackingFile, cfg.PageSize, cfg.Persist)
	if err != nil {
		return nil, err
	}
	f.SetVerify(cfg.BackingVerify)
	t.seq = f.Seq()
	var n int
	if t.file, n, err = attachLevels(store, f, idx, cfg.Persist, t.remote); err != nil {
		f.Close()
		return nil, err
	}
	st := f.Stats()
	log.Info("backing file", "path", f.Path(), "size", st.Size, "free", st.FreeBytes, "persist", cfg.Persist, "verify", cfg.BackingVerify,
		"pages_restored", n, "bytes_on_file", st.Bytes, "took", time.Since(t0))
	if r := t.file.restored; r.Lost > 0 || len(r.Changed) > 0 {
		log.Warn("the daemon before this one stopped without persisting: pages in RAM at its last checkpoint are lost, "+
			"and every page of the pools changed since it; GETs of them answer not found", "pages_lost", r.Lost, "pools_changed", r.Changed)
	}
	return t, nil
}

// Seq is the backing file's checkpoint number as Open found it, and after
// Close the number of the last checkpoint written (0: no file, or none).
// Swap's records name it, so that a start trusts a device's pages only
// with the very file state they were persisted in (swapdev/keep.go).
func (t *Tier) Seq() uint64 { return t.seq }

// HasFile says whether there is a backing file.
func (t *Tier) HasFile() bool { return t.file != nil }

// Start runs the epoch clock, periodic recompression and the file's jobs
// until Stop.
func (t *Tier) Start() {
	if t.file != nil {
		if t.cfg.Persist && t.cfg.CheckpointEvery > 0 {
			t.fileWG.Add(1)
			go t.checkpointEvery(t.cfg.CheckpointEvery)
		}
		if t.cfg.WritebackHeadroom > 0 {
			t.fileWG.Add(1)
			go t.keepRoom(t.cfg.WritebackHeadroom)
		}
	}
	t.jobs.Add(1)
	go t.clock()
}

func (t *Tier) clock() {
	defer t.jobs.Done()
	epoch := time.NewTicker(t.cfg.IdleEpoch)
	defer epoch.Stop()
	var every <-chan time.Time
	if t.cfg.RecompressEvery > 0 {
		tk := time.NewTicker(t.cfg.RecompressEvery)
		defer tk.Stop()
		every = tk.C
	}
	for {
		select {
		case <-t.ctx.Done():
			return
		case <-epoch.C:
			t.store.AgeTick()
		case <-every:
			job := Job{Idle: true, MinAge: t.AgeOf(t.cfg.RecompressIdle), Huge: t.cfg.RecompressHuge}
			t.jobs.Add(1)
			go func() {
				defer t.jobs.Done()
				res, err := t.Recompressor.TryRun(t.ctx, job)
				if err == nil && res.PagesTried > 0 {
					t.log.Info("recompressed", "pages_tried", res.PagesTried, "pages_recompressed", res.PagesKept,
						"bytes_saved", res.BytesSaved, "seconds", res.Seconds, "backend", res.Backend)
				} else if err != nil && err != ErrRunning && t.ctx.Err() == nil {
					t.log.Warn("recompression", "err", err)
				}
			}()
		}
	}
}

// Context is the context of recompressions: it ends when Stop begins.
func (t *Tier) Context() context.Context { return t.ctx }

// Stop ends recompression and the clock and waits for them: a job stops
// after its batch in flight, so before the engines close.
func (t *Tier) Stop() {
	t.cancel()
	t.jobs.Wait()
}

// AgeOf is the age, in epochs, of pages left untouched for at least d:
// an age counts whole epochs begun since the last use, so one more.
func (t *Tier) AgeOf(d time.Duration) int {
	if d <= 0 {
		return 0
	}
	e := t.cfg.IdleEpoch
	return min(int((d+e-1)/e)+1, pagecache.MaxAge)
}

// CheckAge refuses an age the epochs cannot tell.
func (t *Tier) CheckAge(d time.Duration) error {
	if longest := time.Duration(pagecache.MaxAge-1) * t.cfg.IdleEpoch; d > longest {
		return fmt.Errorf("age %v: ages are told up to %v (63 idle epochs of %v); set a longer idle-epoch",
			d, longest, t.cfg.IdleEpoch)
	}
	return nil
}

// keepRoom keeps percent of the memory limit free, writing the coldest
// pages back ahead of the PUTs that would otherwise do it while their
// client waits. It looks every few milliseconds: a look costs a read lock
// while there is room.
func (t *Tier) keepRoom(percent int) {
	defer t.fileWG.Done()
	tk := time.NewTicker(5 * time.Millisecond)
	defer tk.Stop()
	for {
		select {
		case <-t.stop:
			return
		case <-tk.C:
			if err := t.file.KeepRoom(percent); err != nil {
				// Counted and logged where the round failed; a PUT
				// still makes room for itself.
				select {
				case <-t.stop:
					return
				case <-time.After(time.Second):
				}
			}
		}
	}
}

// checkpointEvery records the file's pages periodically, so that a crash
// loses only what came after the last round.
func (t *Tier) checkpointEvery(every time.Duration) {
	defer t.fileWG.Done()
	tk := time.NewTicker(every)
	defer tk.Stop()
	for {
		select {
		case <-t.stop:
			return
		case <-tk.C:
			if err := t.file.Checkpoint(); err != nil {
				t.log.Warn("checkpoint of the backing file failed; the previous one stands", "err", err)
			}
		}
	}
}

// Close runs once requests are answered: with Persist, every page still
// in RAM goes to the file and the index is recorded, so the next start
// has them all; then the file is closed. It says whether the persist
// failed (nil without Persist).
func (t *Tier) Close() (err error) {
	if t.file == nil {
		return nil
	}
	close(t.stop)
	t.fileWG.Wait()
	if t.cfg.Persist {
		t0 := time.Now()
		var n uint64
		n, err = t.file.PersistAll()
		st := t.file.f.Stats()
		if err != nil {
			t.log.Error("persisting the pages failed: those still in RAM are lost with this stop", "err", err,
				"pages_written", n, "pages_on_file", st.Pages)
		} else {
			t.log.Info("pages persisted", "pages_written", n, "pages_on_file", st.Pages, "took", time.Since(t0))
		}
	}
	t.seq = t.file.f.Seq()
	t.file.f.Close()
	return err
}

// The backing file's requests (WRITEBACK) and statistics.

var errNoFile = errors.New("no backing file")

// Writeback moves the pages mode picks (for Idle, those of minAge epochs
// or more) to the backing file now, and says how many went and their bytes.
func (t *Tier) Writeback(mode Mode, minAge int) (pages, bytes uint64, err error) {
	if t.file == nil {
		return 0, 0, errNoFile
	}
	return t.file.Writeback(mode, minAge)
}

// CompactFile moves the pages of sparsely used blocks of the backing file
// together, and says how many moved.
func (t *Tier) CompactFile() (uint64, error) {
	if t.file == nil {
		return 0, errNoFile
	}
	return t.file.CompactFile(), nil
}

// Checkpoint records the pages on the backing file now (with persist;
// else it does nothing).
func (t *Tier) Checkpoint() error {
	if t.file == nil {
		return nil
	}
	return t.file.Checkpoint()
}

// FileStats returns the backing file's statistics; false if there is none.
func (t *Tier) FileStats() (FileStats, bool) {
	if t.file == nil {
		return FileStats{}, false
	}
	return t.file.stats(), true
}
