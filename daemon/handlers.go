package daemon

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/s4d-project/s4d/backends"
	"github.com/s4d-project/s4d/ipc"
	"github.com/s4d-project/s4d/pagecache"
)

var compressedPool = sync.Pool{New: func() any { return new(backends.Compressed) }}

// handle runs one request and returns the response body in parts, or an
// error code and message.
func (c *conn) handle(op ipc.Op, body []byte) ([][]byte, ipc.Code, string) {
	switch op {
	case ipc.OpHello:
		return c.hello(body)
	case ipc.OpPut:
		return c.put(body)
	case ipc.OpGet:
		return c.get(body)
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
	}
	return nil, ipc.CodeUnknownOp, fmt.Sprintf("operation %d is not known", uint8(op))
}

func one(b []byte) [][]byte { return [][]byte{b} }

func (c *conn) hello(body []byte) ([][]byte, ipc.Code, string) {
	minV, maxV, _, err := ipc.DecodeHelloRequest(body)
	if err != nil {
		return nil, ipc.CodeMalformed, err.Error()
	}
	if minV > ipc.Version || maxV < ipc.Version {
		return nil, ipc.CodeVersion, fmt.Sprintf("client speaks versions %d-%d, daemon speaks %d", minV, maxV, ipc.Version)
	}
	h := &ipc.Hello{Version: ipc.Version, PageSize: uint32(c.d.cfg.PageSize), MaxFrame: uint32(c.d.cfg.MaxFrame),
		MaxBatchPages: uint32(c.d.cfg.MaxBatchPages), Server: Version, Codec: c.d.cfg.Codec}
	return one(h.Encode()), ipc.OK, ""
}

// checkKeys applies the rules every batch shares.
func (c *conn) checkKeys(pool string, keys []uint64) (ipc.Code, string) {
	if !ipc.ValidPool(pool) {
		return ipc.CodeBadPool, fmt.Sprintf("pool name %q: want 1-%d printable characters, no spaces", pool, ipc.MaxPoolName)
	}
	if len(keys) == 0 {
		return ipc.CodeEmptyBatch, "batch has no keys"
	}
	if len(keys) > c.d.cfg.MaxBatchPages {
		return ipc.CodeTooLarge, fmt.Sprintf("%d keys in one batch; the limit is %d", len(keys), c.d.cfg.MaxBatchPages)
	}
	if k, dup := duplicate(keys); dup {
		return ipc.CodeDuplicateKey, fmt.Sprintf("key %d appears twice", k)
	}
	return ipc.OK, ""
}

func duplicate(keys []uint64) (uint64, bool) {
	if len(keys) < 2 {
		return 0, false
	}
	s := slices.Clone(keys)
	slices.Sort(s)
	for i := 1; i < len(s); i++ {
		if s[i] == s[i-1] {
			return s[i], true
		}
	}
	return 0, false
}

func storeErr(err error, pool string) (ipc.Code, string) {
	switch err {
	case pagecache.ErrPermission:
		return ipc.CodePermission, fmt.Sprintf("pool %q belongs to another user", pool)
	case pagecache.ErrNoPool:
		return ipc.CodeNotFound, fmt.Sprintf("no pool %q", pool)
	case pagecache.ErrPoolLimit:
		return ipc.CodeLimit, fmt.Sprintf("cannot create pool %q: this user has reached its limit of pools", pool)
	}
	return ipc.CodeInternal, err.Error()
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

func (c *conn) put(body []byte) ([][]byte, ipc.Code, string) {
	req, err := ipc.DecodePut(body)
	if err != nil {
		return nil, ipc.CodeMalformed, err.Error()
	}
	if code, msg := c.checkPut(req.Pool, req.PageSize, req.Keys); code != ipc.OK {
		return nil, code, msg
	}
	return c.store(req.Pool, req.Keys, req.Pages)
}

// checkPut applies what PUT and PUT_FD share, before any work is done:
// a foreign pool is refused before time is spent compressing for it.
func (c *conn) checkPut(pool string, pageSize uint32, keys []uint64) (ipc.Code, string) {
	if int(pageSize) != c.d.cfg.PageSize {
		return ipc.CodePageSize, fmt.Sprintf("pages of %d bytes; this daemon stores %d-byte pages", pageSize, c.d.cfg.PageSize)
	}
	if code, msg := c.checkKeys(pool, keys); code != ipc.OK {
		return code, msg
	}
	if err := c.d.store.CheckPool(c.uid, pool); err != nil {
		return storeErr(err, pool)
	}
	return ipc.OK, ""
}

// putFD stores pages straight from the client's sealed memfd.
func (c *conn) putFD(body []byte, fd int) ([][]byte, ipc.Code, string) {
	req, err := ipc.DecodePutFD(body)
	if err != nil {
		return nil, ipc.CodeMalformed, err.Error()
	}
	if code, msg := c.checkPut(req.Pool, req.PageSize, req.Keys); code != ipc.OK {
		return nil, code, msg
	}
	pages, err := mapPages(fd, req.Offset, len(req.Keys)*c.d.cfg.PageSize, c.d.cfg.PageSize, false)
	if err != nil {
		return nil, ipc.CodeMalformed, err.Error()
	}
	defer unix.Munmap(pages)
	return c.store(req.Pool, req.Keys, pages)
}

// mapPages maps length bytes of a client's memfd, writable if asked. The
// memfd must be sealed against shrinking: a file cut short under the
// mapping would kill the daemon with SIGBUS.
func mapPages(fd int, off uint64, length, pageSize int, writable bool) ([]byte, error) {
	seals, err := unix.FcntlInt(uintptr(fd), unix.F_GET_SEALS, 0)
	if err != nil || seals&unix.F_SEAL_SHRINK == 0 {
		return nil, fmt.Errorf("the descriptor must be a memfd sealed with F_SEAL_SHRINK")
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, fmt.Errorf("fstat: %v", err)
	}
	if off%uint64(pageSize) != 0 || off+uint64(length) > uint64(st.Size) {
		return nil, fmt.Errorf("%d bytes at offset %d: outside the %d-byte memfd or not page aligned", length, off, st.Size)
	}
	prot := unix.PROT_READ
	if writable {
		prot |= unix.PROT_WRITE
	}
	// Populated at once: one call instead of a fault per page.
	mem, err := unix.Mmap(fd, int64(off), length, prot, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		return nil, fmt.Errorf("mmap: %v", err)
	}
	return mem, nil
}

// store compresses pages and keeps them under keys.
func (c *conn) store(pool string, keys []uint64, pages []byte) ([][]byte, ipc.Code, string) {
	out := compressedPool.Get().(*backends.Compressed)
	defer compressedPool.Put(out)
	name, err := c.d.disp.Compress(context.Background(), c.d.cfg.PageSize, pages, out)
	if err != nil {
		c.d.failedWr.Add(uint64(len(keys)))
		return nil, ipc.CodeFailed, "compression failed on every backend: " + err.Error()
	}
	res := make([]pagecache.Result, len(keys))
	batch := &backends.Batch{PageSize: c.d.cfg.PageSize, Pages: pages}
	if err := c.d.store.Put(c.uid, pool, keys, batch, out, c.d.store.BackendID(name), res); err != nil {
		code, msg := storeErr(err, pool)
		return nil, code, msg
	}
	codes := make([]ipc.Code, len(res))
	for i, r := range res {
		codes[i] = codeOf(r)
		switch r {
		case pagecache.NoSpace:
			c.d.noSpace.Add(1)
			c.d.failedWr.Add(1)
		case pagecache.OverQuota:
			c.d.failedWr.Add(1)
		}
	}
	return one(ipc.AppendCodes(nil, codes)), ipc.OK, ""
}

func (c *conn) keys(op ipc.Op, body []byte) (*ipc.KeysRequest, ipc.Code, string) {
	req, err := ipc.DecodeKeys(op, body)
	if err != nil {
		return nil, ipc.CodeMalformed, err.Error()
	}
	code, msg := c.checkKeys(req.Pool, req.Keys)
	return req, code, msg
}

func (c *conn) get(body []byte) ([][]byte, ipc.Code, string) {
	req, code, msg := c.keys(ipc.OpGet, body)
	if code != ipc.OK {
		return nil, code, msg
	}
	n, ps := len(req.Keys), c.d.cfg.PageSize
	resp := make([]byte, 8+n+n*ps)
	binary.LittleEndian.PutUint32(resp, uint32(ps))
	binary.LittleEndian.PutUint32(resp[4:], uint32(n))
	// The found pages are decompressed straight into the response body.
	res, found, code, msg := c.fetch(req.Pool, req.Keys, resp[8+n:])
	if code != ipc.OK {
		return nil, code, msg
	}
	for i, r := range res {
		resp[8+i] = uint8(codeOf(r))
	}
	return one(resp[:8+n+found*ps]), ipc.OK, ""
}

// getFD decompresses pages straight into the client's sealed memfd: page
// i of the request lands at offset + i*page_size; missing pages are left
// as they were.
func (c *conn) getFD(body []byte, fd int) ([][]byte, ipc.Code, string) {
	req, err := ipc.DecodePutFD(body)
	if err != nil {
		return nil, ipc.CodeMalformed, err.Error()
	}
	if code, msg := c.checkKeys(req.Pool, req.Keys); code != ipc.OK {
		return nil, code, msg
	}
	if int(req.PageSize) != c.d.cfg.PageSize {
		return nil, ipc.CodePageSize, fmt.Sprintf("pages of %d bytes; this daemon stores %d-byte pages", req.PageSize, c.d.cfg.PageSize)
	}
	n, ps := len(req.Keys), c.d.cfg.PageSize
	mem, err := mapPages(fd, req.Offset, n*ps, ps, true)
	if err != nil {
		return nil, ipc.CodeMalformed, err.Error()
	}
	defer unix.Munmap(mem)
	// Decode in place when every key is there (the usual case), otherwise
	// into a scratch buffer and scatter.
	into := mem
	if c.d.store.Missing(c.uid, req.Pool, req.Keys) {
		into = make([]byte, n*ps)
	}
	res, _, code, msg := c.fetch(req.Pool, req.Keys, into)
	if code != ipc.OK {
		return nil, code, msg
	}
	codes := make([]ipc.Code, n)
	j := 0
	for i, r := range res {
		codes[i] = codeOf(r)
		if r == pagecache.OK {
			if &into[0] != &mem[0] {
				copy(mem[i*ps:(i+1)*ps], into[j*ps:(j+1)*ps])
			}
			j++
		}
	}
	return one(ipc.AppendCodes(nil, codes)), ipc.OK, ""
}

// fetch decompresses the stored pages of keys into dst, the found ones
// back to back in key order, and says what happened to each key. A page
// that fails to decode or its checksum is reported, never returned wrong.
func (c *conn) fetch(pool string, keys []uint64, dst []byte) ([]pagecache.Result, int, ipc.Code, string) {
	res := make([]pagecache.Result, len(keys))
	scratch := getBody(len(keys)*(c.d.cfg.PageSize+8), 1<<30)
	stored, scratch, err := c.d.store.Get(c.uid, pool, keys, scratch, nil, res)
	defer putBody(scratch)
	if err != nil {
		code, msg := storeErr(err, pool)
		return nil, 0, code, msg
	}
	src := stored[:0]
	for i := range stored {
		if res[i] == pagecache.OK {
			src = append(src, stored[i])
		}
	}
	ps := c.d.cfg.PageSize
	w := 0
	if len(src) > 0 {
		dd := &backends.Decompression{PageSize: ps, Src: src, Dst: dst[:len(src)*ps]}
		if err := c.d.disp.Decompress(context.Background(), dd); err != nil {
			c.d.failedRd.Add(uint64(len(src)))
			return nil, 0, ipc.CodeFailed, "decompression failed on every backend: " + err.Error()
		}
		j := 0
		for i := range res {
			if res[i] != pagecache.OK {
				continue
			}
			if dd.Failed[j] {
				res[i] = pagecache.Failed
				c.d.failedRd.Add(1)
			} else {
				if w != j {
					copy(dst[w*ps:], dst[j*ps:(j+1)*ps])
				}
				w++
			}
			j++
		}
	}
	for _, r := range res {
		if r == pagecache.Corrupt {
			c.d.corrupt.Add(1)
			c.d.failedRd.Add(1)
		}
	}
	return res, w, ipc.OK, ""
}

func (c *conn) del(body []byte) ([][]byte, ipc.Code, string) {
	req, code, msg := c.keys(ipc.OpDel, body)
	if code != ipc.OK {
		return nil, code, msg
	}
	res := make([]pagecache.Result, len(req.Keys))
	if err := c.d.store.Del(c.uid, req.Pool, req.Keys, res); err != nil {
		code, msg := storeErr(err, req.Pool)
		return nil, code, msg
	}
	codes := make([]ipc.Code, len(res))
	for i, r := range res {
		codes[i] = codeOf(r)
	}
	return one(ipc.AppendCodes(nil, codes)), ipc.OK, ""
}

func (c *conn) inspect(body []byte) ([][]byte, ipc.Code, string) {
	req, code, msg := c.keys(ipc.OpInspect, body)
	if code != ipc.OK {
		return nil, code, msg
	}
	infos, err := c.d.store.Inspect(c.uid, req.Pool, req.Keys, req.WithData)
	if err != nil {
		code, msg := storeErr(err, req.Pool)
		return nil, code, msg
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
	return one(out), ipc.OK, ""
}

func (c *conn) stats(body []byte) ([][]byte, ipc.Code, string) {
	pool, err := ipc.DecodeString(body)
	if err != nil {
		return nil, ipc.CodeMalformed, err.Error()
	}
	st := c.d.Stats(c.uid)
	if pool != "" {
		info, err := c.d.store.PoolInfo(c.uid, pool)
		if err != nil {
			code, msg := storeErr(err, pool)
			return nil, code, msg
		}
		st.Pools = []ipc.PoolStats{poolStats(info, c.d.cfg.PageSize)}
	}
	return jsonBody(st)
}

func (c *conn) pools(body []byte) ([][]byte, ipc.Code, string) {
	if len(body) != 0 {
		return nil, ipc.CodeMalformed, "POOLS takes no body"
	}
	return jsonBody(c.d.poolStats(c.uid))
}

func (c *conn) compact(body []byte) ([][]byte, ipc.Code, string) {
	if len(body) != 0 {
		return nil, ipc.CodeMalformed, "COMPACT takes no body"
	}
	moved, freed := c.d.store.Compact()
	c.d.log.Info("compacted", "pages_moved", moved, "bytes_freed", freed, "uid", c.uid)
	return jsonBody(ipc.CompactResult{PagesMoved: moved, BytesFreed: freed})
}

func jsonBody(v any) ([][]byte, ipc.Code, string) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, ipc.CodeInternal, err.Error()
	}
	return one(b), ipc.OK, ""
}

func poolStats(p pagecache.PoolInfo, pageSize int) ipc.PoolStats {
	return ipc.PoolStats{Name: p.Name, UID: p.UID, Pages: p.Pages, OrigBytes: p.Pages * uint64(pageSize),
		StoredBytes: p.StoredBytes, ZeroPages: p.Zero, SamePages: p.Same, HugePages: p.Huge}
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
	s := d.store.Stats()
	return &ipc.Stats{
		Server: Version, PageSize: d.cfg.PageSize, Codec: d.cfg.Codec,
		Uptime: time.Since(d.start).Seconds(),
		Mem: ipc.MemStats{OrigDataSize: s.OrigDataSize, ComprDataSize: s.ComprDataSize,
			MemUsedTotal: s.MemUsedTotal, MemLimit: s.MemLimit, MemUsedMax: s.MemUsedMax,
			Pages: s.Pages, ZeroPages: s.ZeroPages, SamePages: s.SamePages, HugePages: s.HugePages,
			PagesCompacted: s.PagesCompacted, MetadataBytes: s.MetadataBytes},
		IO: ipc.IOStats{FailedReads: d.failedRd.Load(), FailedWrites: d.failedWr.Load(),
			InvalidIO: d.invalid.Load(), NoSpace: d.noSpace.Load(), Fallbacks: d.disp.fallbacks.Load(),
			ChecksumErrors: d.corrupt.Load()},
		Backends: d.disp.Stats(),
		Pools:    d.poolStats(uid),
	}
}
