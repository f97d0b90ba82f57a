package daemon

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os/user"
	"slices"
	"strconv"
	"time"

	"github.com/s4d-project/s4d/ipc"
	"github.com/s4d-project/s4d/pagecache"
	"github.com/s4d-project/s4d/remote"
)

// A pool moves between daemons as an export in the cluster: a manifest
// (block 0, generation 0) naming the export's generation, its number of
// blocks and pages and the page size, then blocks 1..n of that
// generation, each a packed block (remote.Pack) of whole pages under
// their keys. It is named by user name and pool, not uid, since uids
// differ between hosts; both daemons need the same key.

// exportHost is the namespace's host part for exports: no host name has
// a NUL, so an export never shares keys with a host's cold pages.
const exportHost = "\x00export"

const manifestSize = 8 + 8 + 8 + 4

// exportChunk is how many pages go in one block: 1 MiB of 4 KiB pages.
const exportChunk = 256

// blocksPerRound are written or read in one pipelined call.
const blocksPerRound = 16

func (c *conn) poolMove(body []byte) ([]byte, error) {
	dir, pool, err := ipc.DecodePoolMove(body)
	if err != nil {
		return nil, &ipc.Error{Code: ipc.CodeMalformed, Msg: err.Error()}
	}
	if !ipc.ValidPool(pool) {
		return nil, badPool(pool)
	}
	t := c.d.remote
	if t == nil {
		return nil, errorf(ipc.CodeFailed, "this daemon has no remote tier (--remote-tier)")
	}
	u, err := user.LookupId(strconv.FormatUint(uint64(c.uid), 10))
	if err != nil {
		return nil, errorf(ipc.CodeFailed, "uid %d has no user name to move a pool under: %v", c.uid, err)
	}
	ns := remote.Namespace{Host: exportHost, Pool: u.Username + "/" + pool}
	r := ipc.PoolMoveResult{Direction: dir, Pool: pool, User: u.Username}
	t0 := time.Now()
	if dir == ipc.PoolExport {
		err = c.exportPool(t.Store(), ns, pool, &r)
	} else {
		err = c.importPool(t.Store(), ns, pool, &r)
	}
	c.d.log.Info("pool "+dir, "pool", pool, "user", u.Username, "pages", r.Pages, "blocks", r.Blocks,
		"bytes", r.Bytes, "took", time.Since(t0), "err", err)
	if err != nil {
		var ie *ipc.Error
		if errors.As(err, &ie) {
			return nil, err
		}
		return nil, errorf(ipc.CodeFailed, "pool %s after %d pages: %v", dir, r.Pages, err)
	}
	return c.jsonBody(r)
}

type manifest struct {
	gen, blocks, pages uint64
	pageSize           uint32
}

func (m manifest) encode() []byte {
	b := binary.LittleEndian.AppendUint64(nil, m.gen)
	b = binary.LittleEndian.AppendUint64(b, m.blocks)
	b = binary.LittleEndian.AppendUint64(b, m.pages)
	return binary.LittleEndian.AppendUint32(b, m.pageSize)
}

func readManifest(ctx context.Context, s *remote.Store, ns remote.Namespace) (manifest, error) {
	data, errs := s.Get(ctx, ns, []remote.Ref{{ID: 0, Gen: 0}})
	if errs[0] != nil {
		return manifest{}, errs[0]
	}
	d := data[0]
	if len(d) != manifestSize {
		return manifest{}, fmt.Errorf("export manifest of %d bytes", len(d))
	}
	return manifest{gen: binary.LittleEndian.Uint64(d), blocks: binary.LittleEndian.Uint64(d[8:]),
		pages: binary.LittleEndian.Uint64(d[16:]), pageSize: binary.LittleEndian.Uint32(d[24:])}, nil
}

// exportPool writes every page of the caller's pool, decompressed, to the
// cluster, then the manifest: an import finds either the old export whole
// or the new one whole, never a mix (the blocks carry the generation).
// A page that fails its checksum or to decode fails the export.
func (c *conn) exportPool(s *remote.Store, ns remote.Namespace, pool string, r *ipc.PoolMoveResult) error {
	if _, err := c.pages.PoolInfo(c.uid, pool); err != nil {
		return storeErr(err, pool)
	}
	var keys []uint64
	for _, ref := range c.d.store.Pick(func(p pagecache.PageRef) bool { return p.UID == c.uid && p.Pool == pool }, math.MaxInt) {
		keys = append(keys, ref.Key)
	}
	slices.Sort(keys)
	var g [8]byte
	if _, err := rand.Read(g[:]); err != nil {
		return err
	}
	gen := binary.LittleEndian.Uint64(g[:]) | 1 // never the manifest's 0
	ctx := c.req.ctx
	old, oldErr := readManifest(ctx, s, ns)
	ps := c.d.cfg.PageSize
	chunk := min(exportChunk, c.d.cfg.MaxBatchPages)
	dst := make([]byte, chunk*ps)
	var blocks []remote.Block
	flush := func() error {
		if len(blocks) == 0 {
			return nil
		}
		for i, err := range s.Put(ctx, ns, blocks) {
			if err != nil {
				return fmt.Errorf("block %d: %w", blocks[i].ID, err)
			}
			r.Bytes += uint64(len(blocks[i].Data))
		}
		r.Blocks += uint64(len(blocks))
		blocks = blocks[:0]
		return nil
	}
	for lo := 0; lo < len(keys); lo += chunk {
		part := keys[lo:min(lo+chunk, len(keys))]
		res, got, err := c.fetch(pool, part, dst, false)
		if err != nil {
			return err
		}
		var found []uint64
		var objs [][]byte
		for i, k := range part {
			switch res[i] {
			case pagecache.OK:
				n := len(found)
				found = append(found, k)
				objs = append(objs, dst[n*ps:(n+1)*ps])
			case pagecache.NotFound: // deleted since the listing
			default:
				return fmt.Errorf("page %d of pool %s cannot be read (result %d): nothing is exported in its place", k, pool, res[i])
			}
		}
		if len(found) != got {
			return fmt.Errorf("fetch decoded %d pages, found %d", got, len(found))
		}
		if len(found) == 0 {
			continue
		}
		blocks = append(blocks, remote.Block{ID: r.Blocks + uint64(len(blocks)) + 1, Gen: gen, Data: remote.Pack(nil, found, objs)})
		r.Pages += uint64(len(found))
		if len(blocks) == blocksPerRound {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	if err := flush(); err != nil {
		return err
	}
	m := manifest{gen: gen, blocks: r.Blocks, pages: r.Pages, pageSize: uint32(ps)}
	if err := s.Put(ctx, ns, []remote.Block{{ID: 0, Gen: 0, Data: m.encode()}})[0]; err != nil {
		return fmt.Errorf("manifest: %w", err)
	}
	// The previous export's blocks past this one's are garbage now.
	if oldErr == nil && old.blocks > m.blocks {
		var ids []uint64
		for id := m.blocks + 1; id <= old.blocks; id++ {
			ids = append(ids, id)
		}
		s.Delete(ctx, ns, ids)
	}
	return nil
}

// importPool reads an export into the caller's pool of the same name,
// round by round: every block of a round is authenticated before any of
// its pages is stored. A block missing, stale or failing authentication
// stops the import with the reason; pages stored before it stay.
func (c *conn) importPool(s *remote.Store, ns remote.Namespace, pool string, r *ipc.PoolMoveResult) error {
	ctx := c.req.ctx
	m, err := readManifest(ctx, s, ns)
	if err != nil {
		if errors.Is(err, remote.ErrMissing) {
			return errorf(ipc.CodeNotFound, "no export of pool %s by user %s in the cluster", pool, r.User)
		}
		return fmt.Errorf("manifest: %w", err)
	}
	if int(m.pageSize) != c.d.cfg.PageSize {
		return errorf(ipc.CodePageSize, "the export has %d-byte pages; this daemon stores %d-byte pages", m.pageSize, c.d.cfg.PageSize)
	}
	ps := c.d.cfg.PageSize
	for lo := uint64(1); lo <= m.blocks; lo += blocksPerRound {
		var refs []remote.Ref
		for id := lo; id <= min(lo+blocksPerRound-1, m.blocks); id++ {
			refs = append(refs, remote.Ref{ID: id, Gen: m.gen})
		}
		data, errs := s.Get(ctx, ns, refs)
		type unpacked struct {
			keys []uint64
			objs [][]byte
		}
		got := make([]unpacked, len(refs))
		for i, err := range errs {
			if err != nil {
				return fmt.Errorf("block %d: %w", refs[i].ID, err)
			}
			keys, objs, err := remote.Unpack(data[i])
			if err != nil {
				return fmt.Errorf("block %d: %w", refs[i].ID, err)
			}
			for _, o := range objs {
				if len(o) != ps {
					return fmt.Errorf("block %d holds a page of %d bytes", refs[i].ID, len(o))
				}
			}
			got[i] = unpacked{keys, objs}
		}
		for i, u := range got {
			if err := c.importBlock(pool, u.keys, u.objs); err != nil {
				return fmt.Errorf("block %d: %w", refs[i].ID, err)
			}
			r.Blocks++
			r.Pages += uint64(len(u.keys))
			r.Bytes += uint64(len(data[i]))
		}
	}
	if r.Pages != m.pages {
		return fmt.Errorf("the export's manifest says %d pages, its blocks held %d", m.pages, r.Pages)
	}
	return nil
}

// importBlock stores one block's pages as a PUT of them would.
func (c *conn) importBlock(pool string, keys []uint64, objs [][]byte) error {
	if len(keys) == 0 {
		return nil
	}
	if err := c.checkPut(pool, uint32(c.d.cfg.PageSize), keys); err != nil {
		return err
	}
	// Objects are adjacent in the block already (Pack puts them end to
	// end), but a copy keeps that an implementation detail.
	pages := make([]byte, 0, len(objs)*c.d.cfg.PageSize)
	for _, o := range objs {
		pages = append(pages, o...)
	}
	if _, err := c.store(pool, keys, pages); err != nil {
		return err
	}
	for i, res := range c.results(len(keys)) {
		if res != pagecache.OK {
			return fmt.Errorf("page %d was not stored (result %d): the pool's limit or quota?", keys[i], res)
		}
	}
	return nil
}
