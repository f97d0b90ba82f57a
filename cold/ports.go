package cold

import (
	"context"

	"github.com/s4d-project/s4d/backends"
	"github.com/s4d-project/s4d/pagecache"
	"github.com/s4d-project/s4d/pagefmt"
	"github.com/s4d-project/s4d/routing"
)

// The cold tier's view of what it works on, defined here by its user: the
// store and the router satisfy them, and a test may hand in its own.

// Pages is what recompression needs of the page store.
type Pages interface {
	PageSize() int
	BackendID(name string) uint8
	Coldest(n int, f pagecache.ColdFilter) ([]pagecache.PageRef, error)
	ReadRefs(refs []pagecache.PageRef, scratch []byte, out []pagefmt.Stored, ok []bool) ([]pagefmt.Stored, []byte)
	Replace(refs []pagecache.PageRef, b *pagefmt.Batch, c *pagefmt.Compressed, backend uint8, keep []bool) pagecache.Replaced
}

// Store is what the tier's clock and its levels below RAM need of it
// besides: the store's API for moving pages (pagecache/move.go) and the
// hook through which the store calls them (pagecache.Tier).
type Store interface {
	Pages
	AgeTick()
	SetTier(t pagecache.Tier)
	Arena() pagecache.ArenaUse
	Pick(take func(r pagecache.PageRef) bool, limit int) []pagecache.PageRef
	DrainColdest(want uint64, score func(age int) uint32, cursor *uint32) (refs []pagecache.PageRef, undrain func())
	CopyObjects(refs []pagecache.PageRef, slot func(i int) []byte) int
	Relocate(refs []pagecache.PageRef, locs []pagecache.Loc) (moved []bool)
	Records(then func()) (backends []string, pools []pagecache.PoolRecord)
	Restore(backends []string, pools []pagecache.PoolRecord, claim func(loc pagecache.Loc, size int) error) (pagecache.Restored, error)
}

// Compressor is what recompression needs of the router: batches both ways,
// and the engines to time for the strong codec.
type Compressor interface {
	Compress(ctx context.Context, b *pagefmt.Batch, out *pagefmt.Compressed, deliver routing.Deliver) (string, error)
	Decompress(ctx context.Context, dd *pagefmt.Decompression) error
	Usable() []backends.Backend
	CodecCalibration(codec pagefmt.Codec) *routing.Calibration
	SetCodecCalibration(codec pagefmt.Codec, c *routing.Calibration)
}

var (
	_ Store      = (*pagecache.Store)(nil)
	_ Compressor = (*routing.Router)(nil)
)
