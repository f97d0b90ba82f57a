package daemon

// GET and GET_FD: pages decoded straight from the store into the reply,
// the client's memfd, or (large replies) a stream (getstream.go).

import (
	"encoding/binary"
	"time"

	"golang.org/x/sys/unix"

	"github.com/s4d-project/s4d/ipc"
	"github.com/s4d-project/s4d/pagecache"
	"github.com/s4d-project/s4d/pagefmt"
	"github.com/s4d-project/s4d/routing"
)

// get answers a GET; false means the connection must close. A reply over
// streamAbove is streamed (getstream.go); a smaller one is decoded whole.
func (c *conn) get(h ipc.Header, body []byte) bool {
	req, err := c.keys(ipc.OpGet, body)
	if err != nil {
		return c.finish(h, nil, err)
	}
	if len(req.Keys)*c.d.cfg.PageSize > streamAbove {
		return c.streamGet(h, req)
	}
	resp, err := c.getWhole(req)
	return c.finish(h, resp, err)
}

func (c *conn) getWhole(req *ipc.KeysRequest) ([]byte, error) {
	n, ps := len(req.Keys), c.d.cfg.PageSize
	if need := frameHead + 8 + n + n*ps; need > outKeep {
		if err := c.reserve(int64(need), time.Now().Add(c.d.cfg.FrameTimeout)); err != nil {
			return nil, budgetErr(err)
		}
	}
	resp := c.startResponse(8 + n + n*ps)
	resp = resp[:frameHead+8+n+n*ps]
	body := resp[frameHead:]
	binary.LittleEndian.PutUint32(body, uint32(ps))
	binary.LittleEndian.PutUint32(body[4:], uint32(n))
	// The found pages are decompressed straight into the response body.
	res, found, err := c.fetch(req.Pool, req.Keys, body[8+n:], false)
	if err != nil {
		return nil, err
	}
	for i, r := range res {
		body[8+i] = uint8(codeOf(r))
	}
	return resp[:frameHead+8+n+found*ps], nil
}

// getFD decompresses pages straight into the client's sealed memfd: page
// i of the request lands at offset + i*page_size; missing pages are left
// as they were.
func (c *conn) getFD(body []byte, fd int) ([]byte, error) {
	req := &c.s.fdReq
	if err := req.Decode(body); err != nil {
		return nil, &ipc.Error{Code: ipc.CodeMalformed, Msg: err.Error()}
	}
	if err := c.checkKeys(req.Pool, req.Keys); err != nil {
		return nil, err
	}
	if int(req.PageSize) != c.d.cfg.PageSize {
		return nil, errorf(ipc.CodePageSize, "pages of %d bytes; this daemon stores %d-byte pages", req.PageSize, c.d.cfg.PageSize)
	}
	n, ps := len(req.Keys), c.d.cfg.PageSize
	mem, temp, err := c.maps.Pages(fd, req.Offset, n*ps, ps, true)
	if err != nil {
		return nil, &ipc.Error{Code: ipc.CodeMalformed, Msg: err.Error()}
	}
	if temp {
		defer unix.Munmap(mem)
	}
	res, _, err := c.fetch(req.Pool, req.Keys, mem, true)
	if err != nil {
		return nil, err
	}
	return c.codesResponse(res), nil
}

// fetchChunk bounds the keys decoded under one hold of the store's read
// lock, so that a large GET does not keep writers waiting for long.
const fetchChunk = routing.DecodeChunk

// scatterChunk bounds the scratch that pages decoded in place pass
// through when keys are missing among them (decodeViewed): a connection
// reserves no more than this, whatever the chunk.
const scatterChunk = 1024

// fetch decodes the stored pages of keys straight from the store into dst:
// the found ones back to back in key order, or, in place, page i at i
// (what is not found is left as it was). It says what happened to each key
// and how many pages were decoded. A page that fails its checksum or to
// decode is reported, never returned as data (in place, a page that fails
// to decode leaves undefined bytes at its place).
func (c *conn) fetch(pool string, keys []uint64, dst []byte, inPlace bool) ([]pagecache.Result, int, error) {
	n, ps := len(keys), c.d.cfg.PageSize
	res := c.results(n)
	if c.s.viewFn == nil {
		c.s.viewFn = c.decodeViewed
	}
	got := 0
	if inPlace {
		// Pages decoded in place where some are missing go through a
		// scratch buffer of up to a chunk (decodeViewed), reserved here:
		// the store's lock is held while they decode.
		if err := c.reserve(int64(min(n, scatterChunk)*ps), time.Now().Add(c.d.cfg.FrameTimeout)); err != nil {
			return nil, 0, budgetErr(err)
		}
	}
	for lo := 0; lo < n; lo += fetchChunk {
		hi := min(lo+fetchChunk, n)
		v := &c.s.view
		v.res, v.inPlace, v.err = res[lo:hi], inPlace, nil
		if inPlace {
			v.dst = dst[lo*ps : hi*ps]
		} else {
			v.dst = dst[got*ps:]
		}
		// The engine checks each page's checksum as it decodes it.
		stored, err := c.pages.ViewUnchecked(c.uid, pool, keys[lo:hi], c.s.stored[:0], v.res, c.s.viewFn)
		c.s.stored = stored
		if err != nil && v.err == nil {
			return nil, 0, storeErr(err, pool)
		}
		if v.err != nil {
			c.d.failedRd.Add(uint64(hi - lo))
			return nil, 0, &ipc.Error{Code: ipc.CodeFailed, Msg: "decompression failed on every backend: " + v.err.Error()}
		}
		got += v.got
	}
	for _, r := range res {
		switch r {
		case pagecache.Corrupt:
			c.d.corrupt.Add(1)
			c.d.failedRd.Add(1)
		case pagecache.Failed:
			c.d.failedRd.Add(1)
		}
	}
	return res, got, nil
}

// viewing is fetch's state for one chunk, for decodeViewed (a method value
// made once, so that a request allocates no closure).
type viewing struct {
	res     []pagecache.Result
	dst     []byte
	inPlace bool
	got     int
	err     error
	src     []pagefmt.Stored
	pos     []int // where each page of a scattered run belongs
}

// decodeViewed decodes a chunk of stored pages while the store holds them
// (see pagecache.Store.View).
func (c *conn) decodeViewed(stored []pagefmt.Stored) error {
	v, ps := &c.s.view, c.d.cfg.PageSize
	src := v.src[:0]
	for i := range stored {
		if v.res[i] == pagecache.OK {
			src = append(src, stored[i])
		}
	}
	v.got = 0
	if len(src) == 0 {
		return nil
	}
	v.src, v.got = src, 0
	defer clear(src)
	if !v.inPlace || len(src) == len(stored) {
		// Every page decodes where it belongs, or back to back as wanted.
		return c.decodeRun(src, v.res, v.dst, v.inPlace)
	}
	// In place with keys missing: back to back into scratch, then each
	// page to its place, scatterChunk pages at a time.
	into := c.d.bufs.Get(min(len(src), scatterChunk) * ps)
	defer c.d.bufs.Put(into)
	for lo, i := 0, 0; lo < len(src); lo += scatterChunk {
		hi := min(lo+scatterChunk, len(src))
		at, pos := i, v.pos[:0] // pos: where src[lo:hi] belong
		for ; len(pos) < hi-lo; i++ {
			if v.res[i] == pagecache.OK {
				pos = append(pos, i)
			}
		}
		v.pos = pos
		if err := c.decodeRun(src[lo:hi], v.res[at:i], into, true); err != nil {
			return err
		}
		for j, k := range pos {
			if v.res[k] == pagecache.OK {
				copy(v.dst[k*ps:(k+1)*ps], into[j*ps:(j+1)*ps])
			}
		}
	}
	return nil
}

// decodeRun decodes src, the found pages among res (res[i] OK in order),
// into dst back to back. A page that does not decode is marked Failed (or
// Corrupt) in res; the others close up behind it unless keepSlots, when
// each stays at its slot (in place, or for the caller to move by res). It
// adds the decoded pages to v.got.
func (c *conn) decodeRun(src []pagefmt.Stored, res []pagecache.Result, dst []byte, keepSlots bool) error {
	v, ps := &c.s.view, c.d.cfg.PageSize
	dd := &c.s.dec
	dd.PageSize, dd.Src, dd.Dst = ps, src, dst[:len(src)*ps]
	v.err = c.engines.Decompress(c.req.ctx, dd)
	dd.Src, dd.Dst = nil, nil
	if v.err != nil {
		return v.err
	}
	w, j := 0, 0
	for i := range res {
		if res[i] != pagecache.OK {
			continue
		}
		if j < len(dd.Corrupt) && dd.Corrupt[j] {
			res[i] = pagecache.Corrupt
		} else if dd.Failed[j] {
			res[i] = pagecache.Failed
		} else {
			if !keepSlots && w != j {
				copy(dst[w*ps:], dst[j*ps:(j+1)*ps])
			}
			w++
		}
		j++
	}
	v.got += w
	return nil
}
