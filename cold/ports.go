package cold

import (
	"context"

	"github.com/s4d-project/s4d/backends"
	"github.com/s4d-project/s4d/backing"
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

// Store is what the tier's clock and backing file need of it besides.
type Store interface {
	Pages
	AgeTick()
	AttachBacking(f *backing.File, idx *backing.Index, persist bool) (int, error)
	KeepRoom(percent int) error
	Checkpoint() error
	PersistAll() (uint64, error)
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
