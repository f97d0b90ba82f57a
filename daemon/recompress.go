package daemon

import (
	"errors"
	"sort"
	"time"

	"github.com/s4d-project/s4d/cold"
	"github.com/s4d-project/s4d/ipc"
	"github.com/s4d-project/s4d/pagecache"
)

// The cold tier's requests: RECOMPRESS runs a recompression now; IDLE
// counts, lists and marks idle pages. Its background work is cold.Tier.

// coldArgs checks what IDLE and RECOMPRESS share, a pool ("" for all)
// and an age, and gives the age in epochs.
func (c *conn) coldArgs(pool string, minAge time.Duration) (int, error) {
	if pool != "" && !ipc.ValidPool(pool) {
		return 0, badPool(pool)
	}
	if err := c.checkAge(minAge); err != nil {
		return 0, err
	}
	return c.d.cold.AgeOf(minAge), nil
}

func (c *conn) idle(body []byte) ([]byte, error) {
	req, err := ipc.DecodeIdleRequest(body)
	if err != nil {
		return nil, &ipc.Error{Code: ipc.CodeMalformed, Msg: err.Error()}
	}
	age, err := c.coldArgs(req.Pool, req.MinAge)
	if err != nil {
		return nil, err
	}
	st := c.pages
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
	age, err := c.coldArgs(req.Pool, req.MinAge)
	if err != nil {
		return nil, err
	}
	t := c.d.cold
	job := cold.Job{UID: c.uid, Pool: req.Pool, Idle: req.Flags&ipc.RecompressIdle != 0,
		MinAge: age, Huge: req.Flags&ipc.RecompressHuge != 0}
	res, err := t.Recompressor.Run(t.Context(), job)
	switch {
	case errors.Is(err, pagecache.ErrNoPool) || errors.Is(err, pagecache.ErrPermission):
		return nil, storeErr(err, req.Pool)
	case err != nil && t.Context().Err() != nil:
		return nil, errorf(ipc.CodeShuttingDown, "recompression stopped: the daemon is stopping")
	case err != nil:
		return nil, errorf(ipc.CodeFailed, "recompression: %v", err)
	}
	c.d.log.Info("recompressed", "uid", c.uid, "pool", req.Pool, "pages_tried", res.PagesTried,
		"pages_recompressed", res.PagesKept, "bytes_saved", res.BytesSaved, "seconds", res.Seconds)
	return c.jsonBody(recompressResult(res))
}

// recompressStats is STATS's recompress section.
func (d *Daemon) recompressStats() *ipc.RecompressStats {
	st := recompressResult(d.cold.Recompressor.Stats())
	return &st
}
