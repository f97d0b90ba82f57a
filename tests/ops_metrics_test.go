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
