package bench

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

func TestPercentileNearestRank(t *testing.T) {
	var s []time.Duration
	for i := 1; i <= 1000; i++ {
		s = append(s, time.Duration(i))
	}
	for _, c := range []struct {
		p    float64
		want time.Duration
	}{{50, 500}, {99, 990}, {99.9, 999}, {100, 1000}, {0.01, 1}} {
		if got := percentile(s, c.p); got != c.want {
			t.Errorf("p%v of 1..1000 = %d, want %d", c.p, got, c.want)
		}
	}
	// With fewer samples than 1/(1-p), the high percentiles are the maximum.
	few := []time.Duration{10, 20, 30}
	if got := percentile(few, 99.9); got != 30 {
		t.Errorf("p99.9 of 3 samples = %d, want the largest", got)
	}
	if got := percentile(few, 50); got != 20 {
		t.Errorf("p50 of 10,20,30 = %d, want 20", got)
	}
	if got := percentile(nil, 50); got != 0 {
		t.Errorf("p50 of nothing = %d", got)
	}
}

func TestSummariseSortsAndConverts(t *testing.T) {
	s := []time.Duration{3 * time.Microsecond, time.Microsecond, 2 * time.Microsecond, 100 * time.Microsecond}
	l := summarise(s)
	if l.P50 != 2 || l.P99 != 100 || l.P999 != 100 {
		t.Errorf("summarise = %+v, want p50 2, p99 100, p99.9 100 (us)", l)
	}
}

func TestFinishAndRelative(t *testing.T) {
	r := Result{Pages: 250000, OrigBytes: 1e9, StoredBytes: 25e7, PutSeconds: 2, GetSeconds: 0.5}
	r.finish(3, 1)
	want := Figures{PutGBps: 0.5, GetGBps: 2, PutPagesPerSec: 125000, GetPagesPerSec: 500000, Ratio: 4, PutCPUPerGB: 3, GetCPUPerGB: 1}
	if r.Figures != want {
		t.Fatalf("finish = %+v\nwant %+v", r.Figures, want)
	}
	ref := Figures{PutGBps: 1, GetGBps: 4, PutPagesPerSec: 250000, GetPagesPerSec: 1e6, Ratio: 2, PutCPUPerGB: 1.5, GetCPUPerGB: 0}
	got := relative(r.Figures, ref)
	wantRel := Figures{PutGBps: 0.5, GetGBps: 0.5, PutPagesPerSec: 0.5, GetPagesPerSec: 0.5, Ratio: 2, PutCPUPerGB: 2, GetCPUPerGB: 0}
	if got != wantRel {
		t.Errorf("relative = %+v\nwant %+v", got, wantRel)
	}
	if rel := relative(ref, ref); rel.PutGBps != 1 || rel.Ratio != 1 {
		t.Errorf("a figure against itself = %+v, want 1", rel)
	}
	// A zero time must not produce infinities, which JSON cannot carry.
	var z Result
	z.finish(0, 0)
	var buf bytes.Buffer
	if err := (&Report{Results: []Result{z}}).writeJSON(&buf); err != nil {
		t.Errorf("JSON of an empty result: %v", err)
	}
}

func TestTableShowsRatios(t *testing.T) {
	r := Result{Mode: "e2e", Backend: "daemon", Codec: "lz4", Batch: 16, Clients: 2}
	r.Figures = Figures{PutGBps: 0.8, Ratio: 3}
	r.VsCPU = Figures{PutGBps: 0.8, Ratio: 1}
	var buf bytes.Buffer
	if err := (&Report{Corpus: "synthetic mixed", PageSize: 4096, Results: []Result{r}}).writeTable(&buf); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"0.800 (0.80x)", "3.00 (1.00x)", "x cpu-inproc"} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, buf.String())
		}
	}
}

func TestParseBatches(t *testing.T) {
	got, err := parseBatches("256, 1,16,16,4096")
	if err != nil || len(got) != 4 || got[0] != 1 || got[3] != 4096 {
		t.Errorf("parseBatches = %v, %v", got, err)
	}
	for _, bad := range []string{"", "0", "a", "1,,2"} {
		if _, err := parseBatches(bad); err == nil {
			t.Errorf("parseBatches(%q) accepted it", bad)
		}
	}
}

func TestFasterKeepsLeastWallTime(t *testing.T) {
	a := Result{PutSeconds: 1, GetSeconds: 1, Batch: 1}
	b := Result{PutSeconds: 1.5, GetSeconds: 0.2, Batch: 2}
	c := Result{PutSeconds: 3, GetSeconds: 0.1, Batch: 3}
	best := faster(Result{}, a, true)
	best = faster(best, b, false)
	best = faster(best, c, false)
	if best.Batch != 2 {
		t.Errorf("faster kept run %d, want 2 (1.7 s of 2, 1.7 and 3.1)", best.Batch)
	}
}
