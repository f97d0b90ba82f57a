package backing

import (
	"math/rand/v2"
	"testing"
	"time"
)

// A read falls in the first bucket whose bound it does not exceed, as
// Prometheus's le means: 8 us exactly is in the 8 us bucket, a nanosecond
// more in the next.
func TestReadBucket(t *testing.T) {
	for _, c := range []struct {
		d    time.Duration
		want int
	}{
		{0, 0}, {time.Nanosecond, 0}, {8 * time.Microsecond, 0}, {8*time.Microsecond + 1, 1},
		{16 * time.Microsecond, 1}, {17 * time.Microsecond, 2}, {time.Millisecond, 7},
		{ReadBounds[len(ReadBounds)-1], len(ReadBounds) - 1}, {ReadBounds[len(ReadBounds)-1] + 1, len(ReadBounds)},
		{time.Hour, len(ReadBounds)},
	} {
		if got := readBucket(c.d); got != c.want {
			t.Errorf("readBucket(%v) = %d, want %d", c.d, got, c.want)
		}
		if i := readBucket(c.d); i < len(ReadBounds) && c.d > ReadBounds[i] || i > 0 && c.d <= ReadBounds[i-1] {
			t.Errorf("%v in bucket %d of bounds %v", c.d, i, ReadBounds)
		}
	}
	if len(ReadBounds) != readBuckets-1 || ReadBounds[0] != 8*time.Microsecond {
		t.Fatalf("bounds %v", ReadBounds)
	}
}

// The file's reads land in the histogram: its counts add up to the read
// I/Os, its time to theirs, and mean and p99 are read from it.
func TestReadHistogram(t *testing.T) {
	p := testFile(t, 8<<20)
	bf, _, err := Open(p, 4096, false)
	if err != nil {
		t.Fatal(err)
	}
	defer bf.Close()
	objs := randObjs(rand.New(rand.NewPCG(3, 4)), 300)
	offs := put(t, bf, objs)
	for i := range objs {
		// One object a batch: one read I/O each.
		rs := []Read{{Off: offs[i], Len: len(objs[i])}}
		bf.ReadBatch(rs)
		if rs[0].Err != nil {
			t.Fatal(rs[0].Err)
		}
	}
	st := bf.Stats()
	var n uint64
	for _, k := range st.ReadHist {
		n += k
	}
	if len(st.ReadHist) != len(ReadBounds)+1 || n != st.Reads || st.Reads < uint64(len(objs)) {
		t.Fatalf("%d reads, histogram %v", st.Reads, st.ReadHist)
	}
	if st.ReadTime <= 0 || st.ReadMean != st.ReadTime/time.Duration(n) {
		t.Fatalf("read time %v, mean %v over %d reads", st.ReadTime, st.ReadMean, n)
	}
	// p99 is a bound, and at least 99% of the reads are within it.
	var within uint64
	for i, b := range ReadBounds {
		if b <= st.ReadP99 {
			within += st.ReadHist[i]
		}
	}
	if within*100 < n*99 || st.ReadP99 < st.ReadMean/2 {
		t.Fatalf("p99 %v holds %d of %d reads (histogram %v)", st.ReadP99, within, n, st.ReadHist)
	}
}
