package tests

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/s4d-project/s4d/client"
	"github.com/s4d-project/s4d/ipc"
)

// A call made on a connection that sat idle (1 s, a minute, past the
// daemon's --idle-timeout) or that a daemon restart broke takes no more
// than idleSlack longer than the same call made back to back, in every
// client: the Go client, Python, libs4d and the preload of `s4d run`. Each
// client keeps one connection (one handle) for the whole run, as a real
// program does, with a 5 s timeout so that a stall fails fast. The Python
// client once took its whole 30 s timeout after half a second of idle.
const idleSlack = 50 * time.Millisecond

// idleClient makes the same call again and again on one long-lived client.
type idleClient interface {
	call() (time.Duration, error)
	close()
}

func TestClientsAfterIdle(t *testing.T) {
	long := time.Minute
	if testing.Short() {
		long = 2 * time.Second
	}
	py := pythonFor(t)
	pysrc, err := filepath.Abs("../clients/python")
	if err != nil {
		t.Fatal(err)
	}
	cprog, runlib := buildIdleProbes(t)
	runprog := filepath.Join(filepath.Dir(cprog), "probe_run")
	clients := []struct {
		name    string
		restart bool // the preload stops its program when the daemon ends (exit 70), by design
		open    func(t *testing.T, socket string) idleClient
	}{
		{"go", true, func(t *testing.T, socket string) idleClient { return &goProber{c: &client.Client{Socket: socket}} }},
		{"python", true, func(t *testing.T, socket string) idleClient {
			cmd := exec.Command(py, "testdata/idle/probe.py", socket)
			cmd.Env = append(os.Environ(), "PYTHONPATH="+pysrc, "PYTHONDONTWRITEBYTECODE=1")
			return startProbe(t, cmd)
		}},
		{"c", true, func(t *testing.T, socket string) idleClient { return startProbe(t, exec.Command(cprog, socket)) }},
		{"preload", false, func(t *testing.T, socket string) idleClient {
			return startProbe(t, exec.Command(s4dBin, "run", "--socket", socket, "--library", runlib,
				"--min-size", "128K", "--resident", "256K", "--", runprog))
		}},
	}
	for _, cl := range clients {
		t.Run(cl.name, func(t *testing.T) {
			t.Parallel()
			t.Run("open", func(t *testing.T) {
				t.Parallel()
				d := start(t, "--backend", "cpu")
				p := cl.open(t, d.socket)
				defer p.close()
				base := baseline(t, p)
				for _, gap := range []time.Duration{time.Second, long} {
					time.Sleep(gap)
					afterGap(t, p, base, fmt.Sprintf("after %v idle", gap))
				}
				if !cl.restart {
					return
				}
				d.cmd.Process.Kill()
				d.done <- <-d.done
				startOn(t, d.socket, "--backend", "cpu")
				afterGap(t, p, base, "after a daemon restart")
			})
			t.Run("closed-by-daemon", func(t *testing.T) {
				t.Parallel()
				d := start(t, "--backend", "cpu", "--idle-timeout", "1s")
				p := cl.open(t, d.socket)
				defer p.close()
				// The baseline's calls come back to back, well inside the
				// idle timeout; the gap is well past it.
				base := baseline(t, p)
				time.Sleep(2500 * time.Millisecond)
				afterGap(t, p, base, "after the daemon closed the idle connection (--idle-timeout 1s)")
			})
		})
	}
}

// baseline is the median of back-to-back calls, after a few to warm up.
func baseline(t *testing.T, p idleClient) time.Duration {
	t.Helper()
	var ds []time.Duration
	for i := range 8 {
		d, err := p.call()
		if err != nil {
			t.Fatalf("call %d back to back: %v", i, err)
		}
		if i >= 3 {
			ds = append(ds, d)
		}
	}
	slices.Sort(ds)
	return ds[len(ds)/2]
}

func afterGap(t *testing.T, p idleClient, base time.Duration, when string) {
	t.Helper()
	d, err := p.call()
	if err != nil {
		t.Fatalf("the call %s failed: %v", when, err)
	}
	t.Logf("%s: %v (back to back: %v)", when, d, base)
	if d > base+idleSlack {
		t.Errorf("the call %s took %v, back to back %v: more than %v longer", when, d, base, idleSlack)
	}
}

type goProber struct{ c *client.Client }

func (g *goProber) call() (time.Duration, error) {
	page := bytes.Repeat([]byte("idle page "), 410)[:4096]
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	t0 := time.Now()
	if codes, err := g.c.Put(ctx, "idle", []uint64{1}, page); err != nil || codes[0] != ipc.OK {
		return 0, fmt.Errorf("put: %v %v", codes, err)
	}
	got, codes, err := g.c.Get(ctx, "idle", []uint64{1})
	if err != nil || codes[0] != ipc.OK || !bytes.Equal(got, page) {
		return 0, fmt.Errorf("get: %v %v (bytes equal: %v)", codes, err, bytes.Equal(got, page))
	}
	if _, err := g.c.Stats(ctx, "idle"); err != nil {
		return 0, fmt.Errorf("stats: %v", err)
	}
	return time.Since(t0), nil
}

func (g *goProber) close() { g.c.Close() }

// procProber drives a probe program: a line "call" in, the call's
// microseconds (or "error: ...") out.
type procProber struct {
	t     *testing.T
	cmd   *exec.Cmd
	in    io.WriteCloser
	lines chan string
	errb  *syncBuffer
}

func startProbe(t *testing.T, cmd *exec.Cmd) *procProber {
	t.Helper()
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p := &procProber{t: t, cmd: cmd, in: in, lines: make(chan string, 1), errb: &syncBuffer{}}
	cmd.Stderr = p.errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
		close(p.lines)
	}()
	return p
}

func (p *procProber) call() (time.Duration, error) {
	if _, err := io.WriteString(p.in, "call\n"); err != nil {
		return 0, fmt.Errorf("probe gone: %v (stderr: %s)", err, p.errb.String())
	}
	select {
	case l, ok := <-p.lines:
		if !ok {
			return 0, fmt.Errorf("probe exited (stderr: %s)", p.errb.String())
		}
		us, err := strconv.ParseInt(l, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("probe: %s", l)
		}
		return time.Duration(us) * time.Microsecond, nil
	case <-time.After(15 * time.Second):
		return 0, fmt.Errorf("no answer from the probe in 15 s (its client's timeout is 5 s)")
	}
}

func (p *procProber) close() {
	p.in.Close()
	done := make(chan error, 1)
	go func() { done <- p.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			p.t.Errorf("probe %s: %v\n%s", p.cmd.Path, err, p.errb.String())
		}
	case <-time.After(15 * time.Second):
		p.cmd.Process.Signal(syscall.SIGKILL)
		<-done
		p.t.Errorf("probe %s did not exit", p.cmd.Path)
	}
}

// buildIdleProbes compiles libs4d, the C probe against it and the preload
// library, as make does.
func buildIdleProbes(t *testing.T) (cprog, runlib string) {
	t.Helper()
	cc, err := exec.LookPath("cc")
	if err != nil {
		t.Skip("no C compiler")
	}
	c, _ := filepath.Abs("../clients/c")
	pre, _ := filepath.Abs("../clients/preload")
	probes, _ := filepath.Abs("testdata/idle")
	dir := t.TempDir()
	lib := filepath.Join(dir, "libs4d.so.0")
	runlib = filepath.Join(dir, "libs4d-run.so")
	for _, args := range [][]string{
		{"-O2", "-fPIC", "-shared", "-fvisibility=hidden", "-Wall", "-Wextra", "-Werror", "-Wl,-soname,libs4d.so.0",
			"-o", lib, filepath.Join(c, "s4d.c"), filepath.Join(c, "s4d_frame.c"), "-lpthread"},
		{"-O2", "-Wall", "-Wextra", "-Werror", "-I" + c, "-o", filepath.Join(dir, "probe"),
			filepath.Join(probes, "probe.c"), lib, "-Wl,-rpath," + dir},
		{"-O2", "-fPIC", "-shared", "-Wall", "-Wextra", "-Werror", "-o", runlib, filepath.Join(pre, "s4d_run.c"), "-ldl", "-lpthread"},
		{"-O2", "-Wall", "-Wextra", "-Werror", "-o", filepath.Join(dir, "probe_run"), filepath.Join(probes, "probe_run.c")},
	} {
		if out, err := exec.Command(cc, args...).CombinedOutput(); err != nil {
			t.Fatalf("cc %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	return filepath.Join(dir, "probe"), runlib
}
