package tests

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/s4d-project/s4d/backends/corpus"
	"github.com/s4d-project/s4d/ipc"
	"github.com/s4d-project/s4d/remote"
	"github.com/s4d-project/s4d/remote/valkeytest"
)

// A store node lost, through the daemon (issue 43): three masters, no
// replicas, the masters serving their slots while one is lost
// (cluster-require-full-coverage no, docs/admin/remote-tier.md), the
// tier's timeout 2 s (a CI machine under load may keep a live node from
// answering for a second, which would mark it down too). The master
// holding most of the pool's blocks is hung (SIGSTOP), then thawed, then
// killed; each time `s4d ctl get` over
// the whole pool returns every page not in that master's blocks byte for
// byte, fails the others (FAILED, never other bytes), exits 1 and names
// the node and since when; spills go on to the live masters meanwhile;
// thawed, every page is back, with no restart of s4d.
func TestRemoteNodeDown(t *testing.T) {
	if _, _, err := valkeytest.Binaries(); err != nil {
		t.Skip(err)
	}
	vc, err := valkeytest.StartWith(valkeytest.Config{Masters: 3, Extra: "cluster-require-full-coverage no"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(vc.Stop)
	key := bytes.Repeat([]byte{0x43}, remote.KeySize)
	metricsAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t)) // ops_metrics_test.go
	args := append([]string{"--metrics-listen", metricsAddr, "--mem-limit", "4M", "--backing-file", backingFile(t, 8<<20), "--persist", "true",
		"--checkpoint-interval", "0", "--remote-timeout", "2s"}, remoteArgs(t, vc, key, "down-host")...)
	d := start(t, args...)
	pages := corpus.Pages(corpus.Mixed, (32<<20)/4096, 4096, 43)
	n := len(pages) / 4096
	putParallel(t, d, "far", pages, 2)
	st := statsOf(t, d)
	if st.Remote == nil || st.Remote.Pages == 0 || len(st.Remote.Nodes) != 3 {
		t.Fatalf("remote after the put: %+v", st.Remote)
	}
	remotePages := int(st.Remote.Pages)
	// The victim: the master holding most of the blocks.
	victim, most := 0, int64(-1)
	for i := range 3 {
		k, err := dbsize(vc, i)
		if err == nil && k > most {
			victim, most = i, k
		}
	}
	t.Logf("%d pages, %d in the cluster in %d blocks, %d on node %d", n, remotePages, st.Remote.Blocks, most, victim)

	// ctlGet runs the command and checks its exit and message,
	// then reads the pool page by page: every page OK and right, or
	// FAILED; some failed, at most those in the cluster.
	ctlGet := func(phase, cause string) {
		t.Helper()
		out := filepath.Join(t.TempDir(), "out")
		t0 := time.Now()
		msg, err := d.ctl("get", "--pool", "far", "--keys", fmt.Sprintf("0-%d", n-1), "--out", out)
		took := time.Since(t0)
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 1 {
			t.Fatalf("%s: ctl get: %v, want exit 1\n%s", phase, err, msg)
		}
		want := fmt.Sprintf("remote tier: node %s (master) down since ", vc.Addr(victim))
		if !strings.Contains(msg, want) || !strings.Contains(msg, cause) || strings.Contains(msg, "--timeout") {
			t.Fatalf("%s: ctl get said %q, want %q and %q", phase, msg, want, cause)
		}
		got, rerr := os.ReadFile(out)
		if rerr != nil || len(got) != len(pages) {
			t.Fatalf("%s: the output file: %v, %d bytes", phase, rerr, len(got))
		}
		ok, failed := 0, 0
		c := d.client()
		for lo := 0; lo < n; lo += 1024 {
			ks := keys(uint64(lo), min(1024, n-lo))
			data, codes, err := c.Get(ctx(t), "far", ks)
			if err != nil {
				t.Fatal(err)
			}
			for i, code := range codes {
				p := (lo + i) * 4096
				switch code {
				case ipc.OK:
					if !bytes.Equal(data[i*4096:(i+1)*4096], pages[p:p+4096]) {
						t.Fatalf("%s: page %d answered OK with other bytes", phase, lo+i)
					}
					if !bytes.Equal(got[p:p+4096], pages[p:p+4096]) {
						t.Fatalf("%s: page %d served, but not so in ctl get's file", phase, lo+i)
					}
					ok++
				case ipc.CodeFailed:
					failed++
				default:
					t.Fatalf("%s: page %d: %v", phase, lo+i, code)
				}
			}
		}
		if failed == 0 || failed > remotePages {
			t.Fatalf("%s: %d pages failed, %d in the cluster", phase, failed, remotePages)
		}
		t.Logf("%s: ctl get of %d pages took %v: %d returned, %d failed (%q)", phase, n, took.Round(time.Millisecond), ok, failed, strings.TrimSpace(msg))
	}

	vc.Signal(victim, syscall.SIGSTOP)
	ctlGet("hung", "no answer within 2s")
	// Spills go on to the other masters: a pool that must leave RAM and
	// the file is stored, and comes back.
	spilled := statsOf(t, d).Remote.PagesSpilled
	more := corpus.Pages(corpus.Random, (12<<20)/4096, 4096, 44)
	putParallel(t, d, "more", more, 1)
	checkPages(t, d, "more", more)
	st = statsOf(t, d)
	if st.Remote.PagesSpilled == spilled || st.Remote.Up {
		t.Fatalf("with a master down: spilled %d then %d, up %v", spilled, st.Remote.PagesSpilled, st.Remote.Up)
	}
	if out := d.mustCtl("stats"); !strings.Contains(out, "node "+vc.Addr(victim)+" master") || !strings.Contains(out, ": DOWN since ") {
		t.Fatalf("ctl stats with a master down:\n%s", out)
	}
	resp, err := http.Get("http://" + metricsAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{
		fmt.Sprintf("s4d_remote_node_up{node=%q,role=\"master\"} 0", vc.Addr(victim)),
		fmt.Sprintf("s4d_remote_node_up{node=%q,role=\"master\"} 1", vc.Addr((victim+1)%3)),
		fmt.Sprintf("s4d_remote_node_down_since_timestamp_seconds{node=%q}", vc.Addr(victim)),
		fmt.Sprintf("s4d_remote_node_downs_total{node=%q} ", vc.Addr(victim)),
	} {
		if !strings.Contains(string(body), want) {
			t.Fatalf("/metrics with a master down has no %s:\n%s", want, grepLines(string(body), "s4d_remote_node"))
		}
	}
	vc.Signal(victim, syscall.SIGCONT)
	if err := valkeytest.WaitFor(20*time.Second, func() error {
		if !statsOf(t, d).Remote.Up {
			return errors.New("still down")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	checkPages(t, d, "far", pages)
	checkPages(t, d, "more", more)

	// Killed, as the operator shut it down.
	vc.Kill(victim)
	ctlGet("killed", "refused")
}

// dbsize is how many keys node i holds.
func dbsize(vc *valkeytest.Cluster, i int) (int64, error) {
	out, err := vc.CLIDo(i, "DBSIZE")
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(strings.TrimSpace(out), 10, 64)
}
