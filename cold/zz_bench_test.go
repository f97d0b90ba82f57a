package cold

import (
	"context"
	"log/slog"
	"os"
	"testing"

	"github.com/s4d-project/s4d/backends"
	"github.com/s4d-project/s4d/pagecache"
	"github.com/s4d-project/s4d/pagefmt"
	"github.com/s4d-project/s4d/routing"
)

func BenchmarkZZSnap(b *testing.B) {
	pages, err := os.ReadFile("/tmp/idlem/snap2.bin")
	if err != nil {
		b.Skip()
	}
	pages = pages[:64<<20]
	n := len(pages) / 4096
	set := backends.Open(backends.Options{PageSize: 4096}, "cpu")
	rt := routing.New(set, routing.Options{Prefer: "auto", Codec: pagefmt.CodecLZ4, PageSize: 4096, Log: slog.New(slog.DiscardHandler)})
	for b.Loop() {
		b.StopTimer()
		s := pagecache.New(4096, 0)
		for lo := 0; lo < n; lo += 1024 {
			bt := &pagefmt.Batch{PageSize: 4096, Pages: pages[lo*4096 : (lo+1024)*4096]}
			var c pagefmt.Compressed
			rt.Compress(context.Background(), bt, &c, nil)
			keys := make([]uint64, 1024)
			for i := range keys {
				keys[i] = uint64(lo + i)
			}
			s.Put(1, "p", keys, bt, &c, 0, make([]pagecache.Result, 1024))
		}
		r := &Recompressor{Store: s, Router: rt, MinSaving: 0.1}
		b.StartTimer()
		res, _ := r.Run(context.Background(), Job{Idle: true})
		b.ReportMetric(float64(res.BytesIn)/res.Seconds/1e9, "GB/s")
	}
}
