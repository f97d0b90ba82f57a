package tests

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// buildCClient compiles libs4d (clients/c) as make does and the C test
// program against it, into a directory other users may read.
func buildCClient(t *testing.T) string {
	t.Helper()
	cc, err := exec.LookPath("cc")
	if err != nil {
		t.Skip("no C compiler")
	}
	src, err := filepath.Abs("../clients/c")
	if err != nil {
		t.Fatal(err)
	}
	// Not t.TempDir: its parent is closed to the other users that run it.
	dir, err := os.MkdirTemp("", "s4d-cclient-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o755)
	for _, args := range [][]string{
		{"-O2", "-fPIC", "-shared", "-fvisibility=hidden", "-Wall", "-Wextra", "-Werror", "-Wl,-soname,libs4d.so.0",
			"-o", filepath.Join(dir, "libs4d.so.0"), filepath.Join(src, "s4d.c"), filepath.Join(src, "s4d_frame.c"), "-lpthread"},
		{"-O2", "-Wall", "-Wextra", "-Werror", "-I" + src, "-o", filepath.Join(dir, "s4d_test"),
			filepath.Join(src, "tests", "s4d_test.c"), filepath.Join(dir, "libs4d.so.0"), "-Wl,-rpath," + dir},
	} {
		if out, err := exec.Command(cc, args...).CombinedOutput(); err != nil {
			t.Fatalf("cc %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	return filepath.Join(dir, "s4d_test")
}

func runC(t *testing.T, prog, socket, mode string, uid uint32) {
	t.Helper()
	cmd := exec.Command(prog, mode)
	cmd.Env = append(os.Environ(), "S4D_SOCKET="+socket)
	if uid != 0 {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: uid}}
	}
	if out, err := cmd.CombinedOutput(); err != nil || !strings.HasSuffix(string(out), "ok\n") {
		t.Fatalf("C client %s: %v\n%s", mode, err, out)
	}
}

// libs4d against the real daemon: round trips through the socket (split by
// a small batch limit) and memfd buffers, missing keys, daemon errors with
// their messages, bad arguments, and, as root, another user's pool.
func TestCClient(t *testing.T) {
	prog := buildCClient(t)
	d := start(t, "--socket-mode", "0666", "--max-batch-pages", "1000")
	runC(t, prog, d.socket, "all", 0)
	if os.Getuid() == 0 {
		runC(t, prog, d.socket, "own", 4242)
		runC(t, prog, d.socket, "other", 4343)
	}
}

// A call in flight when the daemon dies fails with S4D_ELOST; the next
// call connects to the daemon started again on the same socket.
func TestCClientDaemonRestart(t *testing.T) {
	prog := buildCClient(t)
	d := start(t)
	cmd := exec.Command(prog, "restart")
	cmd.Env = append(os.Environ(), "S4D_SOCKET="+d.socket)
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	lines := bufio.NewReader(stdout)
	want := func(s string) {
		t.Helper()
		l, err := lines.ReadString('\n')
		if err != nil || l != s+"\n" {
			t.Fatalf("C client said %q (%v), want %q\n%s", l, err, s, stderr.String())
		}
	}
	want("ready")
	// Stopped, the daemon holds the GET unanswered until it is killed.
	stopProcess(t, d.cmd.Process.Pid)
	io.WriteString(stdin, "call\n")
	time.Sleep(200 * time.Millisecond)
	d.cmd.Process.Kill()
	<-d.done
	d.done <- nil // for the cleanup's wait
	want("lost")
	os.Remove(d.socket)
	startOn(t, d.socket)
	io.WriteString(stdin, "go\n")
	want("ok")
	if err := cmd.Wait(); err != nil {
		t.Fatalf("C client: %v\n%s", err, stderr.String())
	}
}

// A call to a daemon that does not answer fails with S4D_ETIMEDOUT after
// the handle's timeout; once the daemon goes on, the next call works.
func TestCClientTimeout(t *testing.T) {
	prog := buildCClient(t)
	d := start(t)
	cmd := exec.Command(prog, "timeout")
	cmd.Env = append(os.Environ(), "S4D_SOCKET="+d.socket)
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	lines := bufio.NewReader(stdout)
	want := func(s string) {
		t.Helper()
		l, err := lines.ReadString('\n')
		if err != nil || l != s+"\n" {
			t.Fatalf("C client said %q (%v), want %q\n%s", l, err, s, stderr.String())
		}
	}
	want("ready")
	stopProcess(t, d.cmd.Process.Pid)
	io.WriteString(stdin, "call\n")
	want("timed out")
	syscall.Kill(d.cmd.Process.Pid, syscall.SIGCONT)
	io.WriteString(stdin, "again\n")
	want("ok")
	if err := cmd.Wait(); err != nil {
		t.Fatalf("C client: %v\n%s", err, stderr.String())
	}
}

// stopProcess sends SIGSTOP and waits until every thread has stopped (the
// signal reaches them asynchronously, and a running one could still answer).
func stopProcess(t *testing.T, pid int) {
	t.Helper()
	syscall.Kill(pid, syscall.SIGSTOP)
	task := fmt.Sprintf("/proc/%d/task", pid)
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		ents, err := os.ReadDir(task)
		if err != nil {
			t.Fatal(err)
		}
		stopped := 0
		for _, e := range ents {
			b, err := os.ReadFile(filepath.Join(task, e.Name(), "stat"))
			if i := strings.LastIndexByte(string(b), ')'); err == nil && i >= 0 && len(b) > i+2 && (b[i+2] == 'T' || b[i+2] == 't') {
				stopped++
			}
		}
		if stopped == len(ents) {
			return
		}
	}
	t.Fatal("the daemon did not stop")
}
