package daemon

import (
	"time"

	"github.com/s4d-project/s4d/cold"
	"github.com/s4d-project/s4d/ipc"
	"github.com/s4d-project/s4d/pagecache"
)

// writeback answers WRITEBACK: pages moved to the backing file now, or
// the file compacted. It moves every user's pages, so only root may ask.
func (c *conn) writeback(body []byte) ([]byte, error) {
	var req ipc.WritebackRequest
	if err := req.Decode(body); err != nil {
		return nil, &ipc.Error{Code: ipc.CodeMalformed, Msg: err.Error()}
	}
	mode := req.Mode
	if c.uid != 0 {
		return nil, errorf(ipc.CodePermission, "only root may force a writeback")
	}
	if !c.d.cold.HasFile() {
		return nil, errorf(ipc.CodeFailed, "this daemon has no backing file (--backing-file)")
	}
	r := ipc.WritebackResult{Mode: mode}
	age := pagecache.MaxAge // pages marked idle, or idle for the longest
	if req.MinAge > 0 {
		if err := c.checkAge(req.MinAge); err != nil {
			return nil, err
		}
		age = c.d.cold.AgeOf(req.MinAge)
	}
	var err error
	t0 := time.Now()
	if mode == ipc.WritebackCompact {
		r.Pages, err = c.d.cold.CompactFile()
	} else {
		m, perr := cold.ParseMode(mode)
		if perr != nil {
			return nil, &ipc.Error{Code: ipc.CodeMalformed, Msg: perr.Error() + ", or compact"}
		}
		r.Pages, r.Bytes, err = c.d.cold.Writeback(m, age)
		if err == nil {
			// With persist, what was just written is recorded at once: a
			// forced writeback is a point a crash goes back to.
			err = c.d.cold.Checkpoint()
		}
	}
	c.d.log.Info("writeback", "mode", mode, "pages", r.Pages, "bytes", r.Bytes, "took", time.Since(t0), "err", err)
	if err != nil {
		// What moved before the error stays moved; the rest stays in RAM.
		return nil, errorf(ipc.CodeFailed, "writeback stopped after %d pages: %v", r.Pages, err)
	}
	return c.jsonBody(r)
}

// backingStats is STATS's bd_stat; nil without a backing file.
func (d *Daemon) backingStats() *ipc.BackingStats {
	s, ok := d.cold.FileStats()
	if !ok {
		return nil
	}
	return &ipc.BackingStats{Path: s.Path, Persist: s.Persist, Size: s.Size, FreeBytes: s.FreeBytes,
		Pages: s.Pages, StoredBytes: s.Bytes, Reads: s.Reads, PagesRead: s.PagesRead, BytesRead: s.BytesRead,
		Writes: s.Writes, PagesWritten: s.PagesWritten, BytesWritten: s.BytesWritten,
		ReadMeanUS: float64(s.ReadMean) / float64(time.Microsecond), ReadP99US: uint64(s.ReadP99 / time.Microsecond),
		ReadLatency:  ipc.NewHistogram(s.ReadBounds, s.ReadHist, s.ReadTime),
		WriteSeconds: s.WriteTime.Seconds(), PressureRounds: s.PressureRounds, AheadRounds: s.AheadRounds, Forced: s.Forced,
		Compacted: s.Compacted, Failures: s.Failures, FullRounds: s.FullRounds, ReadErrors: s.ReadErrors, DroppedWrites: s.Dropped,
		Checkpoints: s.Checkpoints, LastError: s.LastError, LostAtStart: s.LostAtStart, ChangedPoolsAtStart: s.ChangedPoolsAtStart}
}
