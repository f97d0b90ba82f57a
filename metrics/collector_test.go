package metrics

import (
	"io"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/s4d-project/s4d/ipc"
	"github.com/s4d-project/s4d/latency"
	"github.com/s4d-project/s4d/routing"
)

type fake struct{ st ipc.Stats }

func (f *fake) Stats(uint32) *ipc.Stats { s := f.st; return &s }
func (f *fake) RequestLatency() []latency.Op {
	counts := make([]uint64, len(latency.Bounds)+1)
	counts[0], counts[len(counts)-1] = 3, 1 // three quick PUTs, one past every bound
	return []latency.Op{{Op: "put", Counts: counts, Sum: 20 * time.Second}}
}
func (f *fake) CalibratedRates() []routing.Rate {
	return []routing.Rate{{Backend: "cpu", Direction: "compress", Pages: 16, BytesPerS: 1.5e9}}
}

func sample() *fake {
	return &fake{ipc.Stats{Codec: "lz4", PageSize: 4096, Uptime: 5,
		Mem: ipc.MemStats{Pages: 10, OrigDataSize: 40960, ComprDataSize: 8000, MemUsedTotal: 12288, MemLimit: 1 << 30, ZeroPages: 2},
		IO:  ipc.IOStats{ChecksumErrors: 1, Fallbacks: 2, Answers: map[string]uint64{"not found": 4, "busy": 1}},
		Backends: []ipc.BackendStats{{Name: "cpu", State: "ok", InUse: true, Counters: []ipc.CodecCounters{
			{Codec: "lz4", Direction: "compress", Batches: 2, Pages: 10, BytesIn: 40960, BytesOut: 8000}}},
			{Name: "cuda", State: "failed"}},
		Pools: []ipc.PoolStats{{Name: "demo", UID: 1000, Pages: 10, OrigBytes: 40960, StoredBytes: 8000}}}}
}

func TestCollectorFollowsConventions(t *testing.T) {
	problems, err := testutil.CollectAndLint(NewCollector(sample(), "0.1.0", "abc"))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("%s: %s", p.Metric, p.Text)
	}
}

func TestCollectorSeries(t *testing.T) {
	want := `
# HELP s4d_checksum_errors_total Stored pages whose checksum did not match; never returned as data.
# TYPE s4d_checksum_errors_total counter
s4d_checksum_errors_total 1
# HELP s4d_error_answers_total Requests answered with an error, by the answer's code.
# TYPE s4d_error_answers_total counter
s4d_error_answers_total{code="busy"} 1
s4d_error_answers_total{code="not found"} 4
# HELP s4d_engine_state 1 for the engine's state: ok, unavailable or failed.
# TYPE s4d_engine_state gauge
s4d_engine_state{device="",engine="cpu",state="failed"} 0
s4d_engine_state{device="",engine="cpu",state="ok"} 1
s4d_engine_state{device="",engine="cpu",state="unavailable"} 0
s4d_engine_state{device="",engine="cuda",state="failed"} 1
s4d_engine_state{device="",engine="cuda",state="ok"} 0
s4d_engine_state{device="",engine="cuda",state="unavailable"} 0
# HELP s4d_memory_limit_bytes The memory limit; absent when there is none.
# TYPE s4d_memory_limit_bytes gauge
s4d_memory_limit_bytes 1.073741824e+09
# HELP s4d_pool_compressed_bytes Compressed size of a pool's pages.
# TYPE s4d_pool_compressed_bytes gauge
s4d_pool_compressed_bytes{pool="demo",uid="1000"} 8000
# HELP s4d_engine_input_bytes_total Bytes an engine read: pages to compress, or stored bytes to decode.
# TYPE s4d_engine_input_bytes_total counter
s4d_engine_input_bytes_total{codec="lz4",device="",direction="compress",engine="cpu"} 40960
`
	if err := testutil.CollectAndCompare(NewCollector(sample(), "0.1.0", "abc"), strings.NewReader(want),
		"s4d_checksum_errors_total", "s4d_error_answers_total", "s4d_engine_state", "s4d_memory_limit_bytes", "s4d_pool_compressed_bytes",
		"s4d_engine_input_bytes_total"); err != nil {
		t.Fatal(err)
	}
	// No limit, no series: an alert on used/limit stays silent.
	f := sample()
	f.st.Mem.MemLimit = 0
	if n := testutil.CollectAndCount(NewCollector(f, "", ""), "s4d_memory_limit_bytes"); n != 0 {
		t.Fatalf("%d limit series without a limit", n)
	}
}

// The GPUs of an engine with several are one series each, by device.
func TestCollectorDevices(t *testing.T) {
	f := sample()
	f.st.Backends = []ipc.BackendStats{
		{Name: "cuda0", Engine: "cuda", Device: "0", State: "ok", InUse: true, InFlight: 3, Counters: []ipc.CodecCounters{
			{Codec: "lz4", Direction: "compress", Batches: 4, Pages: 40, BytesIn: 163840, BytesOut: 9000}}},
		{Name: "cuda1", Engine: "cuda", Device: "1", State: "failed", Counters: []ipc.CodecCounters{
			{Codec: "lz4", Direction: "compress", Batches: 2, Pages: 20, BytesIn: 81920, BytesOut: 4000, Errors: 1}}},
		{Name: "cpu", State: "ok"}}
	want := `
# HELP s4d_engine_batches_in_flight Batches an engine (device) is working on now.
# TYPE s4d_engine_batches_in_flight gauge
s4d_engine_batches_in_flight{device="",engine="cpu"} 0
s4d_engine_batches_in_flight{device="0",engine="cuda"} 3
s4d_engine_batches_in_flight{device="1",engine="cuda"} 0
# HELP s4d_engine_errors_total Batches that failed on an engine (each then went to the next one).
# TYPE s4d_engine_errors_total counter
s4d_engine_errors_total{codec="lz4",device="0",direction="compress",engine="cuda"} 0
s4d_engine_errors_total{codec="lz4",device="1",direction="compress",engine="cuda"} 1
`
	if err := testutil.CollectAndCompare(NewCollector(f, "0.1.0", "abc"), strings.NewReader(want),
		"s4d_engine_batches_in_flight", "s4d_engine_errors_total"); err != nil {
		t.Fatal(err)
	}
	if problems, err := testutil.CollectAndLint(NewCollector(f, "0.1.0", "abc")); err != nil || len(problems) > 0 {
		t.Fatalf("%v %v", problems, err)
	}
}

func TestHandler(t *testing.T) {
	srv := httptest.NewServer(Handler(sample(), "0.1.0", "abc", slog.New(slog.NewTextHandler(io.Discard, nil))))
	defer srv.Close()
	resp, err := srv.Client().Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{
		`s4d_request_duration_seconds_bucket{op="put",le="1e-05"} 3`,
		`s4d_request_duration_seconds_bucket{op="put",le="+Inf"} 4`,
		`s4d_request_duration_seconds_sum{op="put"} 20`,
		`s4d_calibration_rate_bytes_per_second{batch_pages="16",direction="compress",engine="cpu"} 1.5e+09`,
		`s4d_build_info{codec="lz4",commit="abc",page_size="4096",version="0.1.0"} 1`,
		"go_goroutines ", "process_resident_memory_bytes ",
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}
