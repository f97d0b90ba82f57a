package daemon

import (
	"encoding/binary"
	"slices"
	"sync/atomic"
	"time"

	"github.com/s4d-project/s4d/ipc"
	"github.com/s4d-project/s4d/pagecache"
	"github.com/s4d-project/s4d/pagefmt"
)

// A GET reply over streamAbove is streamed: the daemon holds a snapshot of
// the compressed pages (usually a fraction of the reply; nothing for zero
// pages) and two pieces of pieceBytes (one decoding while the other is
// written), never the whole reply, so a client that does not read costs
// little until its write deadline closes it.
const (
	streamAbove = 1 << 20
	pieceBytes  = 512 << 10
)

// snapshot is a streamed GET's copy of the stored pages it returns.
type snapshot struct {
	data  []byte           // compressed bytes, from d.bufs
	used  int              // bytes of data taken
	pages []pagefmt.Stored // the found pages in key order, Data in data
	res   []pagecache.Result
}

// streamGet answers a GET whose reply is over streamAbove; false means the
// connection must close (the reply was cut short).
func (c *conn) streamGet(h ipc.Header, req *ipc.KeysRequest) bool {
	n, ps := len(req.Keys), c.d.cfg.PageSize
	deadline := time.Now().Add(c.d.cfg.FrameTimeout)
	res := c.results(n)
	sn := &c.s.snap
	sn.data, sn.used, sn.pages = c.d.bufs.Get(n*ps), 0, sn.pages[:0]
	defer func() {
		c.d.bufs.Put(sn.data)
		clear(sn.pages)
		if cap(sn.pages) > fetchChunk {
			sn.pages = nil // a connection keeps no large scratch between requests
		}
		sn.data, sn.res = nil, nil
	}()
	if c.s.snapFn == nil {
		c.s.snapFn = c.snapshotViewed
	}
	// Copied chunk by chunk under the store's read lock. Each chunk
	// reserves its worst case first, then gives back what it did not use.
	for lo := 0; lo < n; lo += fetchChunk {
		hi := min(lo+fetchChunk, n)
		worst := int64((hi - lo) * ps)
		if err := c.reserve(worst, deadline); err != nil {
			return c.finish(h, nil, budgetErr(err))
		}
		before := sn.used
		sn.res = res[lo:hi]
		stored, err := c.pages.View(c.uid, req.Pool, req.Keys[lo:hi], c.s.stored[:0], sn.res, c.s.snapFn)
		c.s.stored = stored
		if err != nil {
			return c.finish(h, nil, storeErr(err, req.Pool))
		}
		c.unreserve(worst - int64(sn.used-before))
	}
	found := len(sn.pages)
	for _, r := range res {
		switch r {
		case pagecache.Corrupt:
			c.d.corrupt.Add(1)
			c.d.failedRd.Add(1)
		case pagecache.Failed: // the backing file could not be read
			c.d.failedRd.Add(1)
		}
	}

	// The head: frame header, page size, count and every page's status.
	head := c.startResponse(8 + n)
	head = ipc.AppendHeader(head[:0], ipc.Header{Version: ipc.Version, Op: h.Op, Flags: ipc.FlagResponse, ID: h.ID}, 8+n+found*ps)
	head = binary.LittleEndian.AppendUint32(head, uint32(ps))
	head = binary.LittleEndian.AppendUint32(head, uint32(n))
	for _, r := range res {
		head = append(head, uint8(codeOf(r)))
	}
	err := c.send(head)
	if c.bigOut != nil {
		c.d.bufs.Put(c.bigOut)
		c.bigOut = nil
	}
	if err != nil {
		return false
	}

	// The pages, a piece at a time. Every page passed its checksum when it
	// was copied; one that still fails to decode cannot be reported any
	// more (its status is sent), so the connection is closed rather than
	// let the client take anything for it.
	per := max(1, pieceBytes/ps)
	if err := c.reserve(int64(2*per*ps), deadline); err != nil {
		c.d.log.Warn("GET reply cut short", "uid", c.uid, "err", err)
		return false
	}
	return c.sendPieces(sn.pages, per)
}

// sendPieces decodes pages per at a time and sends them, one piece
// decoding while the last is written: two buffers go round between this
// goroutine and a writer.
func (c *conn) sendPieces(pages []pagefmt.Stored, per int) bool {
	ps := c.d.cfg.PageSize
	free, full := make(chan []byte, 2), make(chan []byte, 2)
	for range 2 {
		free <- c.d.bufs.Get(per * ps)
	}
	var sendErr atomic.Pointer[error]
	go func() {
		for b := range full {
			if sendErr.Load() == nil {
				if err := c.send(b); err != nil {
					sendErr.Store(&err)
				}
			}
			free <- b
		}
		close(free)
	}()
	ok := true
	dd := &c.s.dec
	for j := 0; j < len(pages) && ok && sendErr.Load() == nil; j += per {
		k := min(per, len(pages)-j)
		b := <-free
		dd.PageSize, dd.Src, dd.Dst = ps, pages[j:j+k], b[:k*ps]
		err := c.engines.Decompress(c.req.ctx, dd)
		if err == nil && slices.Contains(dd.Failed[:k], true) {
			err = errUndecodable
		}
		if err != nil {
			c.d.failedRd.Add(uint64(len(pages) - j))
			c.d.log.Error("GET reply cut short: a page that passed its checksum did not decode", "uid", c.uid, "err", err)
			free <- b
			ok = false
			break
		}
		full <- b[:k*ps]
	}
	dd.Src, dd.Dst = nil, nil
	close(full)
	for b := range free {
		c.d.bufs.Put(b[:0])
	}
	return ok && sendErr.Load() == nil
}

// snapshotViewed copies the found pages of a chunk out of the store while
// it holds them (see pagecache.Store.View).
func (c *conn) snapshotViewed(stored []pagefmt.Stored) error {
	sn := &c.s.snap
	for i := range stored {
		if sn.res[i] != pagecache.OK {
			continue
		}
		st := stored[i]
		k := copy(sn.data[sn.used:], st.Data)
		st.Data = sn.data[sn.used : sn.used+k : sn.used+k]
		sn.used += k
		sn.pages = append(sn.pages, st)
	}
	return nil
}

type decodeError string

func (e decodeError) Error() string { return string(e) }

const errUndecodable = decodeError("page did not decode")
