package ctl

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/s4d-project/s4d/cmd/s4d/exitcode"
	"github.com/s4d-project/s4d/ipc"
)

var onePool = []ipc.PoolStats{{Name: "a b", UID: 7, Pages: 3, OrigBytes: 3 << 20, StoredBytes: 1 << 20}}

func render(t *testing.T, rows []ipc.PoolStats, o listOpts) string {
	t.Helper()
	var b bytes.Buffer
	if err := poolTable.print(&b, rows, o); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func TestColumns(t *testing.T) {
	got := render(t, onePool, listOpts{output: "pool,data,ratio"})
	if want := "POOL  DATA  RATIO\na b   3M    3.00\n"; got != want {
		t.Errorf("--output:\n%q\nwant\n%q", got, want)
	}
	if got := render(t, onePool, listOpts{output: "data", bytes: true, noheadings: true}); got != "3145728\n" {
		t.Errorf("--bytes --noheadings: %q", got)
	}
	// Raw output keeps one field per column whatever the text holds.
	if got := render(t, onePool, listOpts{output: "pool,uid", raw: true}); got != "POOL UID\na\\x20b 7\n" {
		t.Errorf("--raw: %q", got)
	}
	if got := render(t, onePool, listOpts{output: "+pool"}); !strings.HasPrefix(got, "POOL  UID") || !strings.Contains(strings.SplitN(got, "\n", 2)[0], "HUGE  POOL") {
		t.Errorf("+COLS should append to the defaults: %q", got)
	}
}

func TestUnknownColumnListsValidOnes(t *testing.T) {
	err := poolTable.print(&bytes.Buffer{}, onePool, listOpts{output: "pool,nosuch"})
	if exitcode.Of(err) != exitcode.Usage {
		t.Fatalf("exit code %d for %v", exitcode.Of(err), err)
	}
	for _, c := range poolTable.columns {
		if !strings.Contains(err.Error(), c.name) {
			t.Errorf("error does not list %s: %v", c.name, err)
		}
	}
	var ue *exitcode.UsageError
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), `"NOSUCH"`) {
		t.Errorf("error: %v", err)
	}
}

func TestJSONKeepsNumbersAndOrder(t *testing.T) {
	out := render(t, onePool, listOpts{json: true, output: "ratio,pool,data"})
	if !strings.Contains(out, `"ratio": 3,`) || strings.Index(out, `"ratio"`) > strings.Index(out, `"pool"`) {
		t.Errorf("json:\n%s", out)
	}
	var v struct {
		Pools []struct {
			Pool string
			Data uint64
		}
	}
	if err := json.Unmarshal([]byte(out), &v); err != nil || len(v.Pools) != 1 || v.Pools[0].Data != 3<<20 || v.Pools[0].Pool != "a b" {
		t.Fatalf("%v %+v", err, v)
	}
	// Nothing stored: no ratio, not NaN.
	if out := render(t, []ipc.PoolStats{{Name: "e"}}, listOpts{json: true, output: "ratio"}); !strings.Contains(out, `"ratio": null`) {
		t.Errorf("empty pool: %s", out)
	}
}

func TestRates(t *testing.T) {
	be := func(pages, in, errs uint64, inUse bool) []ipc.BackendStats {
		return []ipc.BackendStats{{Name: "cpu", InUse: inUse, Counters: []ipc.CodecCounters{
			{Codec: "lz4", Direction: "compress", Batches: 1, Pages: pages, BytesIn: in, Errors: errs}}},
			{Name: "cuda", State: "unavailable"}}
	}
	prev := &ipc.Stats{Uptime: 10, Backends: be(100, 409600, 0, true)}
	cur := &ipc.Stats{Uptime: 12, Backends: be(300, 1228800, 4, true), IO: ipc.IOStats{FailedWrites: 2}}
	rows := rates(prev, cur, time.Time{})
	if len(rows) != 2 || rows[1].name != "cpu" {
		t.Fatalf("want the store and the busy engine, got %d rows", len(rows))
	}
	if r := rows[0]; r.inPages != 100 || r.inBytes != 409600 || r.errors != 3 {
		t.Fatalf("rates %+v", r)
	}
	// A restarted daemon's counters go down: no negative rates.
	if r := rates(cur, prev, time.Time{})[0]; r.inPages != 0 {
		t.Fatalf("after a restart: %+v", r)
	}
}

// The full report shows regions, and the request memory line.
func TestStatsShowsRegions(t *testing.T) {
	st := &ipc.Stats{Codec: "lz4", Regions: []ipc.RegionStats{{ID: 3, UID: 7, PID: 99, Size: 1 << 30, Budget: 128 << 20,
		Resident: 100 << 20, Evicted: 900 << 20, Stored: 300 << 20, Ratio: 3, Faults: 12, FaultP50: 21.5, FaultP99: 40}},
		IO: ipc.IOStats{RefusedConnections: 2, Busy: 1, RequestBytes: 1 << 20, RequestBudget: 1 << 30, RequestBytesMax: 64 << 20}}
	var b bytes.Buffer
	if err := printStats(&b, st, listOpts{}); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{"REGION  UID  PID  SIZE  BUDGET  RESIDENT  EVICTED  COMPR  RATIO  FAULTS  FAULT-P50-US  FAULT-P99-US",
		"3       7    99   1G    128M    100M      900M     300M   3.00   12      21.50         40.00",
		"connections refused 2, requests busy 1, request memory 1M of 1G (most 64M)"} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in\n%s", want, out)
		}
	}
}
