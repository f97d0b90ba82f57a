package metrics

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/s4d-project/s4d/ipc"
)

func TestColdSeries(t *testing.T) {
	f := sample()
	f.st.Recompress = &ipc.RecompressStats{Runs: 2, PagesTried: 100, PagesKept: 80, BytesSaved: 123456, Seconds: 1.5}
	c := NewCollector(f, "0.1.0", "abc")
	problems, err := testutil.CollectAndLint(c)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("%s: %s", p.Metric, p.Text)
	}
	want := `
# HELP s4d_recompressed_pages_total Pages replaced by their recompressed form.
# TYPE s4d_recompressed_pages_total counter
s4d_recompressed_pages_total 80
# HELP s4d_recompress_saved_bytes_total Stored bytes recompression saved.
# TYPE s4d_recompress_saved_bytes_total counter
s4d_recompress_saved_bytes_total 123456
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want), "s4d_recompressed_pages_total", "s4d_recompress_saved_bytes_total"); err != nil {
		t.Fatal(err)
	}
}
