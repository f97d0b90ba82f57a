package routing

import (
	"context"
	"testing"
	"time"

	"github.com/s4d-project/s4d/backends"
	"github.com/s4d-project/s4d/backends/cpu"
	"github.com/s4d-project/s4d/pagefmt"
)

// slowBackend is the cpu backend throttled to rate bytes/s, as a slow
// engine (a GPU emulated by lavapipe) is.
type slowBackend struct {
	*cpu.Backend
	rate float64
}

func (s slowBackend) Name() string { return "slow" }

func (s slowBackend) Compress(ctx context.Context, b *pagefmt.Batch, out *pagefmt.Compressed) error {
	time.Sleep(time.Duration(float64(len(b.Pages)) / s.rate * 1e9))
	return s.Backend.Compress(ctx, b, out)
}

func (s slowBackend) Decompress(ctx context.Context, d *pagefmt.Decompression) error {
	time.Sleep(time.Duration(float64(len(d.Dst)) / s.rate * 1e9))
	return s.Backend.Decompress(ctx, d)
}

// A slow engine is timed within the budget: the daemon answers its socket
// within seconds whatever engines it finds.
func TestCalibrationBudget(t *testing.T) {
	c, err := cpu.New(backends.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	slow := slowBackend{c, 20e6} // 20 MB/s: 64 MiB would take 3 s a run
	start := time.Now()
	cal, err := Calibrate(context.Background(), []backends.Backend{slow}, 4096, pagefmt.CodecLZ4, CalibrationSizes)
	if err != nil {
		t.Fatal(err)
	}
	el := time.Since(start)
	if el > CalibrationBudget+time.Second {
		t.Fatalf("calibration took %v with a budget of %v", el, CalibrationBudget)
	}
	m := cal.Measured["slow"]
	if m < 1 || m == len(CalibrationSizes) {
		t.Fatalf("%d sizes measured at 20 MB/s", m)
	}
	r := cal.Rate["slow"]
	if r[len(r)-1] != r[m-1] || r[0] <= 0 {
		t.Fatalf("rates %v: the untimed sizes should repeat the last timed one", r)
	}
	t.Logf("%v: %s", el, cal)
}
