package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/s4d-project/s4d/client"
)

func TestParseStatCPU(t *testing.T) {
	// The command name holds a space and a ')' to make sure fields are
	// counted from the last one.
	line := "4242 (s4d (x) d) S 1 4242 4242 0 -1 4194560 900 0 0 0 250 75 0 0 20 0 9 0 1234 0 0\n"
	got, err := parseStatCPU(line)
	if err != nil || got != 3.25 {
		t.Errorf("parseStatCPU = %v, %v; want 3.25 s (325 ticks)", got, err)
	}
	if _, err := parseStatCPU("4242 (s4d) S 1 2"); err == nil {
		t.Error("a short stat line was accepted")
	}
	if c, err := pidCPU(os.Getpid()); err != nil || c <= 0 {
		t.Errorf("pidCPU(self) = %v, %v", c, err)
	}
	// Burn about 50 ms of CPU: schedstat agrees with getrusage to a few
	// milliseconds, finer than the 10 ms tick of /proc/PID/stat.
	s0, err := schedCPU(os.Getpid())
	if err != nil {
		t.Skipf("no schedstat here: %v", err)
	}
	r0 := processCPU()
	for end := time.Now().Add(5 * time.Second); processCPU()-r0 < 0.05 && time.Now().Before(end); {
	}
	s1, _ := schedCPU(os.Getpid())
	r1 := processCPU()
	if d, r := s1-s0, r1-r0; r < 0.02 || math.Abs(d-r) > 0.005 {
		t.Errorf("schedstat counted %.4f s while getrusage counted %.4f s", d, r)
	}
}

// startDaemon builds s4d and starts its daemon on a socket of its own.
func startDaemon(t *testing.T, args ...string) (bin, socket string, pid int) {
	t.Helper()
	dir := t.TempDir()
	bin = filepath.Join(dir, "s4d")
	build := exec.Command("go", "build", "-o", bin, "github.com/s4d-project/s4d/cmd/s4d")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	socket = filepath.Join(dir, "s4d.sock")
	d := exec.Command(bin, append([]string{"daemon", "--socket", socket, "--config", os.DevNull}, args...)...)
	var log bytes.Buffer
	d.Stdout, d.Stderr = &log, &log
	if err := d.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		d.Process.Signal(os.Interrupt)
		d.Wait()
	})
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if c, err := net.Dial("unix", socket); err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("daemon did not listen within 10 s:\n%s", log.String())
		}
	}
	return bin, socket, d.Process.Pid
}

func runBench(t *testing.T, bin string, args ...string) *Report {
	t.Helper()
	out, err := exec.Command(bin, append([]string{"bench", "--json"}, args...)...).Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("s4d bench %v: %v\n%s", args, err, stderr)
	}
	var rep Report
	if err := json.Unmarshal(out, &rep); err != nil {
		t.Fatalf("bench --json output: %v\n%s", err, out)
	}
	return &rep
}

func TestEndToEndAgainstRealDaemon(t *testing.T) {
	bin, socket, pid := startDaemon(t)
	png := filepath.Join(t.TempDir(), "p.png")
	rep := runBench(t, bin, "--socket", socket, "--clients", "2", "--batch", "1,64",
		"--synthetic", "mixed", "--size", "4M", "--repeat", "2", "--plot", png)

	if rep.Daemon == nil || rep.Daemon.PID != pid || rep.Daemon.Codec != "lz4" {
		t.Errorf("daemon identified as %+v, want pid %d with lz4", rep.Daemon, pid)
	}
	if rep.Repeat != 2 {
		t.Errorf("report says %d runs per case, want 2", rep.Repeat)
	}
	if rep.Pages != 1024 || len(rep.Results) != 2 || len(rep.Reference) != 2 {
		t.Fatalf("%d pages, %d results, %d references; want 1024, 2, 2", rep.Pages, len(rep.Results), len(rep.Reference))
	}
	var daemonCPU float64
	for i, r := range rep.Results {
		ref := rep.Reference[i]
		if r.Mode != "e2e" || ref.Mode != "inproc" || ref.Backend != "cpu" || r.Batch != ref.Batch || r.Batch != []int{1, 64}[i] {
			t.Errorf("result %d: %s/%s batch %d against %s/%s batch %d", i, r.Mode, r.Backend, r.Batch, ref.Mode, ref.Backend, ref.Batch)
		}
		// Same pages, same codec, same threshold: the daemon must store
		// them as compactly as the engine does in-process.
		if math.Abs(r.Ratio/ref.Ratio-1) > 0.01 || r.Ratio < 1.5 {
			t.Errorf("batch %d: ratio %.3f end to end, %.3f in-process", r.Batch, r.Ratio, ref.Ratio)
		}
		if r.PutGBps <= 0 || r.GetGBps <= 0 || math.Abs(r.VsCPU.PutGBps-r.PutGBps/ref.PutGBps) > 1e-9 {
			t.Errorf("batch %d: put %.3f GB/s (%.2fx of %.3f), get %.3f", r.Batch, r.PutGBps, r.VsCPU.PutGBps, ref.PutGBps, r.GetGBps)
		}
		if l := r.PutLatency; l.P50 <= 0 || l.P50 > l.P99 || l.P99 > l.P999 {
			t.Errorf("batch %d: put latency %+v is not ordered", r.Batch, l)
		}
		daemonCPU += r.PutCPUPerGB + r.GetCPUPerGB
	}
	if daemonCPU <= 0 {
		t.Error("no daemon CPU time was measured")
	}

	// The bench leaves nothing behind in the daemon.
	c := &client.Client{Socket: socket}
	defer c.Close()
	st, err := c.Stats(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range st.Pools {
		if strings.HasPrefix(p.Name, "bench-") && p.Pages != 0 {
			t.Errorf("pool %s still holds %d pages", p.Name, p.Pages)
		}
	}
	if b, err := os.ReadFile(png); err != nil || !bytes.HasPrefix(b, []byte("\x89PNG")) {
		t.Errorf("--plot wrote no PNG: %v", err)
	}

	// In-process through the same binary: a codec of its own, no daemon.
	in := runBench(t, bin, "--inproc", "--backend", "cpu", "--codec", "zstd", "--batch", "32", "--size", "2M")
	if len(in.Results) != 1 || in.Results[0].Codec != "zstd" || in.Results[0].Ratio < 1.5 || in.Results[0].VsCPU.PutGBps != 1 {
		t.Errorf("in-process zstd run: %+v", in.Results)
	}

	// No daemon there: a clear failure, not an empty report.
	out, err := exec.Command(bin, "bench", "--socket", socket+".absent", "--size", "1M").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "not reachable") {
		t.Errorf("bench without a daemon: %v\n%s", err, out)
	}
}
