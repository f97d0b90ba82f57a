package daemon

import (
	"context"

	"github.com/s4d-project/s4d/pagecache"
	"github.com/s4d-project/s4d/pagefmt"
	"github.com/s4d-project/s4d/routing"
)

// What answering requests needs of the page store and of the engines,
// defined here by their user: a connection holds these two, not the
// concrete store and router, which the Daemon builds, tunes and stops.

// pageStore is what request handling asks of the store (pagecache.Store).
type pageStore interface {
	Put(uid uint32, pool string, keys []uint64, b *pagefmt.Batch, c *pagefmt.Compressed, backend uint8, res []pagecache.Result) error
	View(uid uint32, pool string, keys []uint64, out []pagefmt.Stored, res []pagecache.Result, fn func([]pagefmt.Stored) error) ([]pagefmt.Stored, error)
	ViewUnchecked(uid uint32, pool string, keys []uint64, out []pagefmt.Stored, res []pagecache.Result, fn func([]pagefmt.Stored) error) ([]pagefmt.Stored, error)
	Del(uid uint32, pool string, keys []uint64, res []pagecache.Result) error
	Inspect(uid uint32, pool string, keys []uint64, withData bool) ([]pagecache.PageInfo, error)
	BackendID(name string) uint8

	CheckPool(uid uint32, pool string) error
	PoolInfo(uid uint32, pool string) (pagecache.PoolInfo, error)
	PoolCodec(uid uint32, pool string) (pagefmt.Codec, error)
	SetPoolCodec(uid uint32, pool string, codec pagefmt.Codec) error
	Compact() (moved, freed uint64)

	// IDLE's (WRITEBACK goes to the cold tier, cold.Tier).
	MarkIdle(uid uint32, pool string) (uint64, error)
	Idle(uid uint32, pool string) ([]pagecache.IdleInfo, error)
	Coldest(n int, f pagecache.ColdFilter) ([]pagecache.PageRef, error)
}

// compressor is what request handling asks of the engines (routing.Router).
type compressor interface {
	Compress(ctx context.Context, b *pagefmt.Batch, out *pagefmt.Compressed, deliver routing.Deliver) (string, error)
	Decompress(ctx context.Context, dd *pagefmt.Decompression) error
}

var (
	_ pageStore  = (*pagecache.Store)(nil)
	_ compressor = (*routing.Router)(nil)
)
