// Package tests drives the real s4d binary end to end.
package tests

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/s4d-project/s4d/client"
	"github.com/s4d-project/s4d/ipc"
)

var s4dBin string

func TestMain(m *testing.M) {
	// A world-readable directory, so tests can run the binary as other users.
	dir, err := os.MkdirTemp("", "s4d-e2e-")
	if err != nil {
		panic(err)
	}
	os.Chmod(dir, 0o755)
	s4dBin = filepath.Join(dir, "s4d")
	// Tests run the daemon under the race detector; benchmarks need it plain.
	args := []string{"build", "-race", "-o", s4dBin, "../cmd/s4d"}
	flag.Parse()
	if f := flag.Lookup("test.bench"); f != nil && f.Value.String() != "" {
		args = append(args[:1], args[2:]...)
	}
	out, err := exec.Command("go", args...).CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "building s4d: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// daemon is one running s4d.
type daemon struct {
	t      testing.TB
	socket string
	cmd    *exec.Cmd
	log    *syncBuffer
	done   chan error
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// start runs `s4d daemon` on a fresh socket and waits until it answers.
func start(t testing.TB, args ...string) *daemon {
	t.Helper()
	return startBin(t, s4dBin, args...)
}

// startBin is start with another build of s4d.
func startBin(t testing.TB, bin string, args ...string) *daemon {
	t.Helper()
	dir, err := os.MkdirTemp("", "s4d-sock-")
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(dir, 0o755)
	t.Cleanup(func() { os.RemoveAll(dir) })
	return startOnBin(t, bin, filepath.Join(dir, "run", "s4d.sock"), args...)
}

func startOn(t testing.TB, socket string, args ...string) *daemon {
	t.Helper()
	return startOnBin(t, s4dBin, socket, args...)
}

func startOnBin(t testing.TB, bin, socket string, args ...string) *daemon {
	t.Helper()
	d := &daemon{t: t, socket: socket, log: &syncBuffer{}, done: make(chan error, 1)}
	d.cmd = exec.Command(bin, append([]string{"daemon", "--socket", socket, "--log-level", "debug"}, args...)...)
	d.cmd.Stdout, d.cmd.Stderr = d.log, d.log
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { d.done <- d.cmd.Wait() }()
	t.Cleanup(func() {
		d.cmd.Process.Kill()
		<-d.done
		if t.Failed() {
			t.Logf("daemon log:\n%s", d.log.String())
		}
	})
	deadline := time.Now().Add(20 * time.Second)
	for {
		if c, err := net.Dial("unix", socket); err == nil {
			c.Close()
			return d
		}
		select {
		case err := <-d.done:
			d.done <- err
			t.Fatalf("daemon exited: %v\n%s", err, d.log.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("daemon did not listen on %s\n%s", socket, d.log.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (d *daemon) client() *client.Client {
	c := &client.Client{Socket: d.socket}
	d.t.Cleanup(func() { c.Close() })
	return c
}

// ctl runs `s4d ctl` against the daemon and returns its output and error.
func (d *daemon) ctl(args ...string) (string, error) {
	cmd := exec.Command(s4dBin, append([]string{"ctl", "--socket", d.socket}, args...)...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func (d *daemon) mustCtl(args ...string) string {
	d.t.Helper()
	out, err := d.ctl(args...)
	if err != nil {
		d.t.Fatalf("s4d ctl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

func ctx(t testing.TB) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return c
}

func keys(first uint64, n int) []uint64 {
	k := make([]uint64, n)
	for i := range k {
		k[i] = first + uint64(i)
	}
	return k
}

func allOK(t testing.TB, what string, ks []uint64, codes []ipc.Code) {
	t.Helper()
	if err := ipc.PageError(ks, codes); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}
