package tests

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/s4d-project/s4d/backends/corpus"
)

// freePort returns a loopback port nobody listens on now.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// promQuery asks Prometheus's HTTP API for an instant vector and returns
// each series' value by its labels, printed.
func promQuery(base, q string) (map[string]string, error) {
	resp, err := http.Get(base + "/api/v1/query?query=" + url.QueryEscape(q))
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var r struct {
		Status string
		Data   struct {
			Result []struct {
				Metric map[string]string
				Value  [2]any
			}
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil || r.Status != "success" {
		return nil, fmt.Errorf("query %s: %s %v", q, r.Status, err)
	}
	out := map[string]string{}
	for _, s := range r.Data.Result {
		delete(s.Metric, "instance")
		delete(s.Metric, "job")
		delete(s.Metric, "__name__")
		out[fmt.Sprint(s.Metric)], _ = s.Value[1].(string)
	}
	return out, nil
}

// A real Prometheus scrapes a real daemon: the series arrive and move as
// pages are stored.
func TestPrometheusScrapes(t *testing.T) {
	prom, err := exec.LookPath("prometheus")
	if err != nil {
		t.Skip("prometheus is not installed (make deps installs it)")
	}
	metricsAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	d := start(t, "--metrics-listen", metricsAddr)

	waitQuery := startPrometheus(t, prom, metricsAddr)
	waitQuery("the first scrape", `up{job="s4d"}`, func(m map[string]string) bool { return m["map[]"] == "1" })
	waitQuery("an empty store", "s4d_stored_pages", func(m map[string]string) bool { return m["map[]"] == "0" })

	c := d.client()
	if _, err := c.Put(ctx(t), "prom", keys(0, 256), corpus.Pages(corpus.Text, 256, 4096, 7)); err != nil {
		t.Fatal(err)
	}
	waitQuery("the stored pages", "s4d_stored_pages", func(m map[string]string) bool { return m["map[]"] == "256" })
	got := waitQuery("the pool's pages", `s4d_pool_stored_pages{pool="prom"}`, func(m map[string]string) bool { return len(m) == 1 })
	if got["map[pool:prom uid:"+fmt.Sprint(os.Getuid())+"]"] != "256" {
		t.Fatalf("pool series %v", got)
	}
	waitQuery("the engine's pages", `sum(s4d_engine_pages_total{engine="cpu",direction="compress"})`,
		func(m map[string]string) bool { return m["map[]"] == "256" })
	waitQuery("a compression ratio over 1", "s4d_stored_data_bytes / s4d_compressed_bytes",
		func(m map[string]string) bool {
			r, err := strconv.ParseFloat(m["map[]"], 64)
			return err == nil && r > 1
		})
	waitQuery("the cpu engine ok", `s4d_engine_state{engine="cpu",state="ok"}`,
		func(m map[string]string) bool { return m["map[engine:cpu state:ok]"] == "1" })
	waitQuery("the PUT's latency", `s4d_request_duration_seconds_count{op="put"}`,
		func(m map[string]string) bool { return m["map[op:put]"] == "1" })
}

// startPrometheus runs a Prometheus scraping metricsAddr every 500 ms and
// returns a query that waits (40 s in all) for its answer to satisfy ok.
func startPrometheus(t *testing.T, prom, metricsAddr string) func(what, q string, ok func(map[string]string) bool) map[string]string {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "prometheus.yml")
	os.WriteFile(cfg, []byte(fmt.Sprintf("global:\n  scrape_interval: 500ms\n  scrape_timeout: 400ms\n"+
		"scrape_configs:\n  - job_name: s4d\n    static_configs:\n      - targets: ['%s']\n", metricsAddr)), 0o644)
	webAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	log := &syncBuffer{}
	cmd := exec.Command(prom, "--config.file="+cfg, "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+webAddr, "--log.level=warn")
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		if t.Failed() {
			t.Logf("prometheus log:\n%s", log.String())
		}
	})
	base := "http://" + webAddr
	deadline := time.Now().Add(40 * time.Second)
	waitQuery := func(what, q string, ok func(map[string]string) bool) map[string]string {
		t.Helper()
		var last map[string]string
		var err error
		for time.Now().Before(deadline) {
			if last, err = promQuery(base, q); err == nil && ok(last) {
				return last
			}
			time.Sleep(250 * time.Millisecond)
		}
		t.Fatalf("%s: %s gave %v (%v)", what, q, last, err)
		return nil
	}
	return waitQuery
}

// An address that is not loopback is refused before the daemon starts.
func TestMetricsAddressRefused(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:9367", ":9367", "192.0.2.1:9367"} {
		out, code := exitOf(t, -1, "daemon", "--socket", filepath.Join(t.TempDir(), "s.sock"), "--config", "/dev/null",
			"--metrics-listen", addr)
		if code == 0 || !strings.Contains(out, "no authentication") || !strings.Contains(out, addr) {
			t.Errorf("--metrics-listen %s: exit %d\n%s", addr, code, out)
		}
	}
}

// A metrics socket passed by systemd (s4d-metrics.socket, named "metrics")
// is served as /metrics while the daemon keeps its own socket, in either
// order systemd passes them.
func TestMetricsSocketPassed(t *testing.T) {
	activate, err := exec.LookPath("systemd-socket-activate")
	if err != nil {
		t.Skip("systemd-socket-activate is not installed")
	}
	for _, metricsFirst := range []bool{true, false} {
		dir := t.TempDir()
		sock, addr := filepath.Join(dir, "s4d.sock"), fmt.Sprintf("127.0.0.1:%d", freePort(t))
		args := []string{"-l", sock, "-l", addr, "--fdname=s4d.socket:metrics"}
		if metricsFirst {
			args = []string{"-l", addr, "-l", sock, "--fdname=metrics:s4d.socket"}
		}
		log := &syncBuffer{}
		cmd := exec.Command(activate, append(args, s4dBin, "daemon", "--config", "/dev/null", "--socket", sock)...)
		cmd.Stdout, cmd.Stderr = log, log
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		d := &daemon{t: t, socket: sock}
		var body string
		for end := time.Now().Add(20 * time.Second); time.Now().Before(end) && !strings.Contains(body, "s4d_stored_pages 0"); time.Sleep(100 * time.Millisecond) {
			// The first connection makes systemd-socket-activate start s4d.
			if resp, err := http.Get("http://" + addr + "/metrics"); err == nil {
				b := new(strings.Builder)
				io.Copy(b, resp.Body)
				resp.Body.Close()
				body = b.String()
			}
		}
		out, err := d.ctl("stats", "--output", "pages", "--noheadings")
		cmd.Process.Kill()
		cmd.Wait()
		if !strings.Contains(body, "s4d_stored_pages 0") || err != nil || strings.TrimSpace(out) != "0" {
			t.Fatalf("metrics first %v: /metrics %q; stats %q %v\n%s", metricsFirst, body, out, err, log.String())
		}
	}
}

// scrapeMetrics reads /metrics once into sample name (with its labels, as
// printed) to value.
func scrapeMetrics(t *testing.T, addr string) map[string]float64 {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, l := range strings.Split(string(b), "\n") {
		if i := strings.LastIndexByte(l, ' '); i > 0 && !strings.HasPrefix(l, "#") {
			if v, err := strconv.ParseFloat(l[i+1:], 64); err == nil {
				out[l[:i]] = v
			}
		}
	}
	return out
}

// A region's faults, time to serve them and bytes moved reach /metrics,
// and stay there once the region is gone; the backing file's read time is
// a histogram whose count is its read I/Os.
func TestMetricsRegionsAndBackingReads(t *testing.T) {
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	d := start(t, "--metrics-listen", addr, "--mem-limit", "4M", "--backing-file", backingFile(t, 64<<20))

	// Pages to the file and back: read I/Os.
	pages := corpus.Pages(corpus.Mixed, 1024, 4096, 11)
	c := d.client()
	allOKPut(t, c, "m", keys(0, 1024), pages)
	d.mustCtl("writeback", "all")
	checkPages(t, d, "m", pages)

	// A region: 256 pages, 16 resident; written, evicted, read back.
	ps := os.Getpagesize()
	m, err := c.Map(ctx(t), 256*ps, 16*ps)
	if err != nil {
		t.Fatal(err)
	}
	mem := m.Bytes()
	for i := 0; i < 256; i++ {
		mem[i*ps] = byte(i + 1)
	}
	waitFor(t, 30*time.Second, "eviction to the budget", func() bool {
		st := statsOf(t, d)
		return len(st.Regions) == 1 && st.Regions[0].Resident <= 16*uint64(ps)
	})
	for i := 255; i >= 0; i-- {
		if mem[i*ps] != byte(i+1) {
			t.Fatalf("region page %d", i)
		}
	}
	live := scrapeMetrics(t, addr)
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	var after map[string]float64
	waitFor(t, 10*time.Second, "the region gone", func() bool {
		after = scrapeMetrics(t, addr)
		return after["s4d_regions"] == 0
	})

	st := statsOf(t, d)
	if st.Backing == nil || st.Backing.Reads == 0 {
		t.Fatalf("no reads from the backing file: %+v", st.Backing)
	}
	read := "s4d_backing_read_duration_seconds"
	if got := after[read+"_count"]; got < float64(st.Backing.Reads) || got != after[read+`_bucket{le="+Inf"}`] || after[read+"_sum"] <= 0 {
		t.Errorf("backing reads: %v in the histogram (+Inf %v, sum %v), %d in STATS", got,
			after[read+`_bucket{le="+Inf"}`], after[read+"_sum"], st.Backing.Reads)
	}
	if _, ok := after["s4d_backing_read_latency_mean_seconds"]; ok {
		t.Error("the read time is still a mean gauge")
	}
	if live["s4d_regions"] != 1 {
		t.Errorf("s4d_regions %v with a region mapped", live["s4d_regions"])
	}
	for _, name := range []string{"s4d_region_faults_total", "s4d_region_evicted_bytes_total", "s4d_region_restored_bytes_total",
		"s4d_region_fault_duration_seconds_count", "s4d_region_fault_duration_seconds_sum"} {
		if live[name] <= 0 || after[name] < live[name] {
			t.Errorf("%s: %v with the region, %v after it went (counters must not go down)", name, live[name], after[name])
		}
	}
	// Every evicted page read back by a fault or its read-ahead: 240 at least.
	if after["s4d_region_restored_bytes_total"] < 240*float64(ps) || after["s4d_region_evicted_bytes_total"] < 240*float64(ps) {
		t.Errorf("region bytes: %v evicted, %v restored", after["s4d_region_evicted_bytes_total"], after["s4d_region_restored_bytes_total"])
	}

	// A real Prometheus aggregates the histograms as it would across hosts
	// (sum by le) and takes quantiles of them.
	prom, err := exec.LookPath("prometheus")
	if err != nil {
		t.Skip("prometheus is not installed (make deps installs it); the rest was checked")
	}
	waitQuery := startPrometheus(t, prom, addr)
	reads := fmt.Sprint(after[read+"_count"])
	waitQuery("the read histogram summed by bucket", `sum by (le) (s4d_backing_read_duration_seconds_bucket)`,
		func(m map[string]string) bool { return m["map[le:+Inf]"] == reads && len(m) == 21 })
	for _, h := range []string{"s4d_backing_read_duration_seconds", "s4d_region_fault_duration_seconds"} {
		waitQuery("a quantile of "+h, `histogram_quantile(0.99, sum by (le) (`+h+`_bucket))`, func(m map[string]string) bool {
			q, err := strconv.ParseFloat(m["map[]"], 64)
			return err == nil && q > 0 && q < 5
		})
	}
}
