package cold

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/s4d-project/s4d/pagecache"
	"github.com/s4d-project/s4d/pagefmt"
	"github.com/s4d-project/s4d/routing"
)

// failingEngines is a Compressor whose engines all fail: recompression
// through it must report the failure and leave every page as it was.
type failingEngines struct {
	*routing.Router // calibration and the engines' list as the real one
	calls           int
}

func (f *failingEngines) Compress(context.Context, *pagefmt.Batch, *pagefmt.Compressed, routing.Deliver) (string, error) {
	f.calls++
	return "", errors.New("every engine failed")
}

func TestRecompressEnginesFail(t *testing.T) {
	s, rt := storeWith(t, 64)
	keys := make([]uint64, 64)
	for i := range keys {
		keys[i] = uint64(i)
	}
	before := make([]byte, 64*4096)
	read := func(dst []byte) {
		t.Helper()
		res := make([]pagecache.Result, 64)
		if _, err := s.View(1, "p", keys, nil, res, func(st []pagefmt.Stored) error {
			return rt.Decompress(context.Background(), &pagefmt.Decompression{PageSize: 4096, Src: st, Dst: dst})
		}); err != nil {
			t.Fatal(err)
		}
	}
	read(before)
	eng := &failingEngines{Router: rt}
	r := &Recompressor{Store: s, Router: eng, MinSaving: 0.01}
	res, err := r.Run(context.Background(), Job{Idle: true})
	if err == nil || eng.calls == 0 || res.PagesKept != 0 {
		t.Fatalf("engines failing: %+v %v (%d calls)", res, err, eng.calls)
	}
	after := make([]byte, 64*4096)
	read(after)
	if !bytes.Equal(before, after) {
		t.Fatal("pages changed by a recompression that failed")
	}
}
