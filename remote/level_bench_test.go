package remote

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/s4d-project/s4d/backends/corpus"
	"github.com/s4d-project/s4d/backing"
)

// The remote level beside the backing file, the same objects on each
// (8 MiB of "mixed" corpus pages, 4 KiB each, as a page stored raw is):
// writes in rounds of 2 MiB, reads of every object in batches of 256,
// and single-object reads (a GET of one page off RAM) for p50/p99. The
// cluster is the loopback test cluster (one replica acknowledges each
// write); the file is on the test's TMPDIR, O_DIRECT.
func BenchmarkLevelVsFile(b *testing.B) {
	tc := getCluster(b)
	o := tc.opts()
	c, err := Dial(context.Background(), o)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	s, err := NewStore(c, testKey)
	if err != nil {
		b.Fatal(err)
	}
	tr := &Tier{c: c, s: s, host: "bench", fresh: map[string]struct{}{}}
	const n = 2048
	pages := corpus.Pages(corpus.Mixed, n, 4096, 9)
	objs := make([][]byte, n)
	for i := range objs {
		objs[i] = pages[i*4096 : (i+1)*4096]
	}
	path := filepath.Join(b.TempDir(), "backing")
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		b.Fatal(err)
	}
	os.Truncate(path, 64<<20)
	f, _, err := backing.Open(path, 4096, false)
	if err != nil {
		b.Skip(err)
	}
	defer f.Close()
	ctx := context.Background()

	var locs []uint32
	var offs []uint64
	b.Run("remote/write", func(b *testing.B) {
		b.SetBytes(int64(n * 4096))
		for b.Loop() {
			if benchLevel != nil { // the last round's blocks go, to keep the cluster small
				for _, loc := range locs {
					benchLevel.Forget(loc)
				}
				benchLevel.Flush(ctx)
			}
			l := NewLevel(tr, "bench")
			locs = locs[:0]
			for lo := 0; lo < n; lo += 512 {
				ls, err := l.Store(ctx, objs[lo:lo+512])
				if err != nil {
					b.Fatal(err)
				}
				locs = append(locs, ls...)
			}
			// Kept for the reads: the last round's level.
			benchLevel = l
		}
	})
	b.Run("file/write", func(b *testing.B) {
		b.SetBytes(int64(n * 4096))
		for b.Loop() {
			for _, off := range offs {
				f.Free(off, 4096)
			}
			offs = offs[:0]
			for lo := 0; lo < n; lo += 512 {
				sizes := make([]int, 512)
				for i := range sizes {
					sizes[i] = 4096
				}
				bt := f.Place(sizes)
				for i := range bt.Offs {
					copy(bt.Slot(i), objs[lo+i])
				}
				if err := f.Write(bt); err != nil {
					b.Fatal(err)
				}
				offs = append(offs, bt.Offs...)
			}
		}
	})
	l := benchLevel
	b.Run("remote/read", func(b *testing.B) {
		b.SetBytes(int64(n * 4096))
		for b.Loop() {
			for lo := 0; lo < n; lo += 256 {
				if _, errs := l.Read(ctx, locs[lo:lo+256]); errs[0] != nil {
					b.Fatal(errs[0])
				}
			}
		}
	})
	b.Run("file/read", func(b *testing.B) {
		b.SetBytes(int64(n * 4096))
		for b.Loop() {
			for lo := 0; lo < n; lo += 256 {
				rs := make([]backing.Read, 256)
				for i := range rs {
					rs[i] = backing.Read{Off: offs[lo+i], Len: 4096}
				}
				f.ReadBatch(rs)
				if rs[0].Err != nil {
					b.Fatal(rs[0].Err)
				}
			}
		}
	})
	pct := func(b *testing.B, d []time.Duration) {
		slices.Sort(d)
		b.ReportMetric(float64(d[len(d)/2].Microseconds()), "p50-us")
		b.ReportMetric(float64(d[len(d)*99/100].Microseconds()), "p99-us")
	}
	b.Run("remote/one", func(b *testing.B) {
		var d []time.Duration
		i := 0
		for b.Loop() {
			t0 := time.Now()
			if _, errs := l.Read(ctx, locs[i%n:i%n+1]); errs[0] != nil {
				b.Fatal(errs[0])
			}
			d = append(d, time.Since(t0))
			i += 97
		}
		pct(b, d)
	})
	b.Run("file/one", func(b *testing.B) {
		var d []time.Duration
		i := 0
		for b.Loop() {
			t0 := time.Now()
			rs := []backing.Read{{Off: offs[i%n], Len: 4096}}
			f.ReadBatch(rs)
			if rs[0].Err != nil {
				b.Fatal(rs[0].Err)
			}
			d = append(d, time.Since(t0))
			i += 97
		}
		pct(b, d)
	})
}

var benchLevel *Level
