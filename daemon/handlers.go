package daemon

import (
	"encoding/binary"
	"encoding/json"
	"slices"
	"time"

	"golang.org/x/sys/unix"

	"github.com/s4d-project/s4d/ipc"
	"github.com/s4d-project/s4d/pagecache"
	"github.com/s4d-project/s4d/pagefmt"
	"github.com/s4d-project/s4d/routing"
)

// scratch holds what one request decodes into and works in, reused by
// the next request of the connection so that a request allocates little.
type scratch struct {
	putReq  ipc.PutRequest
	fdReq   ipc.PutFDRequest
	keyReq  ipc.KeysRequest
	res     []pagecache.Result
	batch   pagefmt.Batch
	stored  []pagefmt.Stored
	view    viewing
	viewFn  func([]pagefmt.Stored) error
	snap    snapshot
	snapFn  func([]pagefmt.Stored) error
	putting putting
	putFn   routing.Deliver
	dec     pagefmt.Decompression
	sorted  []uint64
	codec   pagefmt.Codec // the pool's, for the PUT being served
}

// handle runs one request and returns the response (from startResponse),
// or an error: an *ipc.Error is answered with its code and message.
func (c *conn) handle(op ipc.Op, body []byte) ([]byte, error) {
	switch op {
	case ipc.OpHello:
		return c.hello(body)
	case ipc.OpPut:
		return c.put(body)
	case ipc.OpDel:
		return c.del(body)
	case ipc.OpInspect:
		return c.inspect(body)
	case ipc.OpStats:
		return c.stats(body)
	case ipc.OpPools:
		return c.pools(body)
	case ipc.OpCompact:
		return c.compact(body)
	case ipc.OpIdle: // recompress.go
		return c.idle(body)
	case ipc.OpRecompress:
		return c.recompress(body)
	case ipc.OpPoolCodec: // poolcodec.go
		return c.poolCodec(body)
	case ipc.OpSwap:
		return c.swap(body) // swap.go
	case ipc.OpWriteback:
		return c.writeback(body) // writeback.go
	case ipc.OpPoolMove:
		return c.poolMove(body) // export.go
	}
	return nil, errorf(ipc.CodeUnknownOp, "operation %d is not known", uint8(op))
}

// reply copies a body built elsewhere into a response.
func (c *conn) reply(body []byte) []byte { return append(c.startResponse(len(body)), body...) }

func (c *conn) hello(body []byte) ([]byte, error) {
	minV, maxV, _, err := ipc.DecodeHelloRequest(body)
	if err != nil {
		return nil, &ipc.Error{Code: ipc.CodeMalformed, Msg: err.Error()}
	}
	if minV > ipc.Version || maxV < ipc.Version {
		return nil, errorf(ipc.CodeVersion, "client speaks versions %d-%d, daemon speaks %d", minV, maxV, ipc.Version)
	}
	h := &ipc.Hello{Version: ipc.Version, PageSize: uint32(c.d.cfg.PageSize), MaxFrame: uint32(c.d.cfg.MaxFrame),
		MaxBatchPages: uint32(c.d.cfg.MaxBatchPages), Server: Version, Codec: c.d.cfg.Codec}
	return c.reply(h.Encode()), nil
}

// badPool refuses a pool name no client may use.
func badPool(pool string) error {
	return errorf(ipc.CodeBadPool, "pool name %q: want 1-%d printable characters, no spaces", pool, ipc.MaxPoolName)
}

// checkKeys applies the rules every batch shares.
func (c *conn) checkKeys(pool string, keys []uint64) error {
	if !ipc.ValidPool(pool) {
		return badPool(pool)
	}
	if len(keys) == 0 {
		return errorf(ipc.CodeEmptyBatch, "batch has no keys")
	}
	if len(keys) > c.d.cfg.MaxBatchPages {
		return errorf(ipc.CodeTooLarge, "%d keys in one batch; the limit is %d", len(keys), c.d.cfg.MaxBatchPages)
	}
	if k, dup := c.duplicate(keys); dup {
		return errorf(ipc.CodeDuplicateKey, "key %d appears twice", k)
	}
	return nil
}

func (c *conn) duplicate(keys []uint64) (uint64, bool) {
	// Batches usually hold ascending keys: no sort needed to tell.
	i := 1
	for i < len(keys) && keys[i-1] < keys[i] {
		i++
	}
	if i >= len(keys) {
		return 0, false
	}
	s := append(c.s.sorted[:0], keys...)
	c.s.sorted = s
	slices.Sort(s)
	for i := 1; i < len(s); i++ {
		if s[i] == s[i-1] {
			return s[i], true
		}
	}
	return 0, false
}

func codeOf(r pagecache.Result) ipc.Code {
	switch r {
	case pagecache.OK:
		return ipc.OK
	case pagecache.NoSpace:
		return ipc.CodeNoSpace
	case pagecache.NotFound:
		return ipc.CodeNotFound
	case pagecache.Corrupt:
		return ipc.CodeCorrupt
	case pagecache.OverQuota:
		return ipc.CodeLimit
	}
	return ipc.CodeFailed
}

// results returns the connection's per-page result scratch for n pages.
func (c *conn) results(n int) []pagecache.Result {
	if cap(c.s.res) < n {
		c.s.res = make([]pagecache.Result, n)
	}
	c.s.res = c.s.res[:n]
	return c.s.res
}

// codesResponse is the body PUT, DEL and GET_FD answer with: a count and
// one status per page.
func (c *conn) codesResponse(res []pagecache.Result) []byte {
	b := c.startResponse(4 + len(res))
	b = binary.LittleEndian.AppendUint32(b, uint32(len(res)))
	for _, r := range res {
		b = append(b, uint8(codeOf(r)))
	}
	return b
}

func (c *conn) put(body []byte) ([]byte, error) {
	req := &c.s.putReq
	if err := req.Decode(body); err != nil {
		return nil, &ipc.Error{Code: ipc.CodeMalformed, Msg: err.Error()}
	}
	if err := c.checkPut(req.Pool, req.PageSize, req.Keys); err != nil {
		return nil, err
	}
	return c.store(req.Pool, req.Keys, req.Pages)
}

// checkPut applies what PUT and PUT_FD share, before any work is done:
// a foreign pool is refused before time is spent compressing for it.
func (c *conn) checkPut(pool string, pageSize uint32, keys []uint64) error {
	if int(pageSize) != c.d.cfg.PageSize {
		return errorf(ipc.CodePageSize, "pages of %d bytes; this daemon stores %d-byte pages", pageSize, c.d.cfg.PageSize)
	}
	if err := c.checkKeys(pool, keys); err != nil {
		return err
	}
	codec, err := c.pages.PoolCodec(c.uid, pool)
	if err != nil {
		return storeErr(err, pool)
	}
	c.s.codec = codec // the pool's own, if it chose one (poolcodec.go)
	return nil
}

// putFD stores pages straight from the client's sealed memfd.
func (c *conn) putFD(body []byte, fd int) ([]byte, error) {
	req := &c.s.fdReq
	if err := req.Decode(body); err != nil {
		return nil, &ipc.Error{Code: ipc.CodeMalformed, Msg: err.Error()}
	}
	if err := c.checkPut(req.Pool, req.PageSize, req.Keys); err != nil {
		return nil, err
	}
	pages, temp, err := c.maps.Pages(fd, req.Offset, len(req.Keys)*c.d.cfg.PageSize, c.d.cfg.PageSize, false)
	if err != nil {
		return nil, &ipc.Error{Code: ipc.CodeMalformed, Msg: err.Error()}
	}
	if temp {
		defer unix.Munmap(pages)
	}
	return c.store(req.Pool, req.Keys, pages)
}

// store compresses pages and keeps them under keys. A GPU backend hands
// its results over piece by piece from its own buffers, each stored as it
// comes, so the compressed bytes are copied once, into the store.
func (c *conn) store(pool string, keys []uint64, pages []byte) ([]byte, error) {
	// The compressed output can take up to the pages' size.
	if len(pages) > ipc.ReadBufSize {
		if err := c.reserve(int64(len(pages)), time.Now().Add(c.d.cfg.FrameTimeout)); err != nil {
			return nil, budgetErr(err)
		}
	}
	out := c.d.bufs.GetOut()
	defer c.d.bufs.PutOut(out)
	batch := &c.s.batch
	*batch = pagefmt.Batch{PageSize: c.d.cfg.PageSize, Pages: pages, Codec: c.s.codec}
	res := c.results(len(keys))
	c.s.putting = putting{pool: pool, keys: keys, res: res}
	defer func() { batch.Pages, c.s.putting = nil, putting{} }()
	if c.s.putFn == nil {
		c.s.putFn = c.storePart
	}
	_, err := c.engines.Compress(c.req.ctx, batch, out, c.s.putFn)
	if c.s.putting.err != nil {
		return nil, storeErr(c.s.putting.err, pool)
	}
	if err != nil {
		c.d.failedWr.Add(uint64(len(keys)))
		return nil, &ipc.Error{Code: ipc.CodeFailed, Msg: "compression failed on every backend: " + err.Error()}
	}
	for _, r := range res {
		switch r {
		case pagecache.NoSpace:
			c.d.noSpace.Add(1)
			c.d.failedWr.Add(1)
		case pagecache.OverQuota:
			c.d.failedWr.Add(1)
		}
	}
	return c.codesResponse(res), nil
}

// putting is the PUT being stored, for storePart.
type putting struct {
	pool string
	keys []uint64
	res  []pagecache.Result
	err  error // the store's, which ends the PUT
}

// storePart keeps pages [lo, lo+n) of the PUT in progress.
func (c *conn) storePart(backend string, lo int, part *pagefmt.Compressed) error {
	p := &c.s.putting
	n := len(part.Class)
	b := c.s.batch.Part(lo, n)
	err := c.pages.Put(c.uid, p.pool, p.keys[lo:lo+n], &b, part, c.pages.BackendID(backend), p.res[lo:lo+n])
	if !pagefmt.IsPlaceError(err) { // the engine's failure: the router redoes the batch
		p.err = err
	}
	return err
}

func (c *conn) keys(op ipc.Op, body []byte) (*ipc.KeysRequest, error) {
	req := &c.s.keyReq
	if err := req.Decode(op, body); err != nil {
		return nil, &ipc.Error{Code: ipc.CodeMalformed, Msg: err.Error()}
	}
	return req, c.checkKeys(req.Pool, req.Keys)
}

func (c *conn) del(body []byte) ([]byte, error) {
	req, err := c.keys(ipc.OpDel, body)
	if err != nil {
		return nil, err
	}
	res := c.results(len(req.Keys))
	if err := c.pages.Del(c.uid, req.Pool, req.Keys, res); err != nil {
		return nil, storeErr(err, req.Pool)
	}
	return c.codesResponse(res), nil
}

func (c *conn) inspect(body []byte) ([]byte, error) {
	req, err := c.keys(ipc.OpInspect, body)
	if err != nil {
		return nil, err
	}
	if req.WithData {
		// The pages' stored bytes, the body built from them and its copy
		// in the response.
		if err := c.reserve(3*int64(len(req.Keys)*c.d.cfg.PageSize), time.Now().Add(c.d.cfg.FrameTimeout)); err != nil {
			return nil, budgetErr(err)
		}
	}
	infos, err := c.pages.Inspect(c.uid, req.Pool, req.Keys, req.WithData)
	if err != nil {
		return nil, storeErr(err, req.Pool)
	}
	out := binary.LittleEndian.AppendUint32(nil, uint32(len(infos)))
	for _, in := range infos {
		if in.Result == pagecache.Corrupt {
			c.d.corrupt.Add(1)
		}
		pi := ipc.PageInfo{Status: codeOf(in.Result), Size: uint32(in.Size), Fill: in.Fill,
			Backend: in.Backend, Data: in.Data}
		if in.Result == pagecache.OK {
			pi.Class = in.Class.String()
		}
		out = ipc.AppendPageInfo(out, &pi, req.WithData)
	}
	return c.reply(out), nil
}

func (c *conn) stats(body []byte) ([]byte, error) {
	pool, err := ipc.DecodeString(body)
	if err != nil {
		return nil, &ipc.Error{Code: ipc.CodeMalformed, Msg: err.Error()}
	}
	st := c.d.Stats(c.uid)
	if pool != "" {
		info, err := c.pages.PoolInfo(c.uid, pool)
		if err != nil {
			return nil, storeErr(err, pool)
		}
		st.Pools = []ipc.PoolStats{poolStats(info, c.d.cfg.PageSize)}
	}
	return c.jsonBody(st)
}

func (c *conn) pools(body []byte) ([]byte, error) {
	if len(body) != 0 {
		return nil, errorf(ipc.CodeMalformed, "POOLS takes no body")
	}
	return c.jsonBody(c.d.poolStats(c.uid))
}

func (c *conn) compact(body []byte) ([]byte, error) {
	if len(body) != 0 {
		return nil, errorf(ipc.CodeMalformed, "COMPACT takes no body")
	}
	moved, freed := c.pages.Compact()
	c.d.log.Info("compacted", "pages_moved", moved, "bytes_freed", freed, "uid", c.uid)
	return c.jsonBody(ipc.CompactResult{PagesMoved: moved, BytesFreed: freed})
}

func (c *conn) jsonBody(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, &ipc.Error{Code: ipc.CodeInternal, Msg: err.Error()}
	}
	return c.reply(b), nil
}

func poolStats(p pagecache.PoolInfo, pageSize int) ipc.PoolStats {
	return ipc.PoolStats{Name: p.Name, UID: p.UID, Pages: p.Pages, OrigBytes: p.Pages * uint64(pageSize),
		StoredBytes: p.StoredBytes, ZeroPages: p.Zero, SamePages: p.Same, HugePages: p.Huge, Codec: codecName(p.Codec)}
}

func (d *Daemon) poolStats(uid uint32) []ipc.PoolStats {
	out := []ipc.PoolStats{}
	for _, p := range d.store.Pools(uid) {
		out = append(out, poolStats(p, d.cfg.PageSize))
	}
	return out
}

// Stats builds the STATS answer as uid may see it: store-wide totals, every
// backend, and uid's own pools (all pools for root).
func (d *Daemon) Stats(uid uint32) *ipc.Stats {
	used, peak := d.mem.InUse()
	s := d.store.Stats()
	return &ipc.Stats{
		Server: Version, PageSize: d.cfg.PageSize, Codec: d.cfg.Codec,
		Uptime: time.Since(d.start).Seconds(),
		Mem: ipc.MemStats{OrigDataSize: s.OrigDataSize, ComprDataSize: s.ComprDataSize,
			MemUsedTotal: s.MemUsedTotal, MemLimit: s.MemLimit, MemUsedMax: s.MemUsedMax,
			Pages: s.Pages, ZeroPages: s.ZeroPages, SamePages: s.SamePages, HugePages: s.HugePages,
			PagesCompacted: s.PagesCompacted, MetadataBytes: s.MetadataBytes},
		IO: ipc.IOStats{FailedReads: d.failedRd.Load(), FailedWrites: d.failedWr.Load(),
			InvalidIO: d.answers.invalid(), NoSpace: d.noSpace.Load(), Fallbacks: d.router.Fallbacks(),
			ChecksumErrors: d.corrupt.Load(), RefusedConnections: d.refused.Load(), Busy: d.answers.of(ipc.CodeBusy),
			Answers:      d.answers.byName(),
			RequestBytes: used, RequestBytesMax: peak, RequestBudget: d.mem.Total()},
		Backends: backendStats(d.router.Stats()), // wire.go
		Pools:    d.poolStats(uid),
		Regions:  d.regs.Stats(uid), RegionTotals: d.regs.Totals(uid), // totals: root only

		IdleEpoch: d.cfg.IdleEpoch.Seconds(), Recompress: d.recompressStats(), // recompress.go
		Backing: d.backingStats(), // writeback.go
		Remote:  d.remoteStats(),  // remote.go
	}
}
