package runcmd

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/urfave/cli/v2"

	_ "github.com/s4d-project/s4d/backends/cpu"
	"github.com/s4d-project/s4d/client"
	"github.com/s4d-project/s4d/daemon"
	"github.com/s4d-project/s4d/settings"
)

// TestMain lets the test binary play `s4d run` (S4D_RUNCMD_HELPER=run) or
// a daemon of its own process (=daemon).
func TestMain(m *testing.M) {
	switch os.Getenv("S4D_RUNCMD_HELPER") {
	case "run":
		app := &cli.App{Name: "s4d", Commands: []*cli.Command{Command}}
		if err := app.Run(append([]string{"s4d", "run"}, os.Args[1:]...)); err != nil {
			os.Stderr.WriteString(err.Error() + "\n")
			os.Exit(1)
		}
		os.Exit(0)
	case "daemon":
		serve(os.Getenv("S4D_SOCKET"))
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func serve(sock string) {
	cfg := settings.Defaults()
	cfg.Socket, cfg.Backend = sock, "cpu"
	cfg.Log = slog.New(slog.DiscardHandler)
	d, err := daemon.New(context.Background(), cfg)
	if err != nil {
		panic(err)
	}
	if err := d.Listen(); err != nil {
		panic(err)
	}
	// SIGTERM stops it cleanly: its regions are handed back.
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	d.Serve(ctx)
}

// The program under test: large allocations of every kind, written,
// checked, resized, freed; with "fork" a child that leaves them alone and
// one that touches them; with "loop" it reads its memory for ever; with
// "wait" it waits for a line on stdin once its memory is filled.
const prog = `
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/wait.h>
#define MB (1UL << 20)
static void fill(unsigned char *p, size_t n, int seed) { for (size_t i = 0; i < n; i += 512) p[i] = (unsigned char)(i / 4096 * 7 + seed); }
static int check(unsigned char *p, size_t n, int seed) { for (size_t i = 0; i < n; i += 512) if (p[i] != (unsigned char)(i / 4096 * 7 + seed)) return 0; return 1; }
int main(int argc, char **argv) {
	const char *mode = argc > 1 ? argv[1] : "";
	unsigned char *a = malloc(64 * MB), *b = calloc(32, MB), *c = NULL;
	if (posix_memalign((void **)&c, 4096, 48 * MB)) return 2;
	fill(a, 64 * MB, 1); fill(c, 48 * MB, 3);
	for (size_t i = 0; i < 32 * MB; i += 4096) if (b[i]) { puts("calloc not zero"); return 3; }
	fill(b, 32 * MB, 2);
	if (!strcmp(mode, "loop")) { puts("filled"); fflush(stdout); for (;;) if (!check(a, 64 * MB, 1)) { puts("WRONG"); return 4; } }
	if (!strcmp(mode, "wait")) { puts("filled"); fflush(stdout); getchar(); }
	if (!strcmp(mode, "fork")) {
		pid_t k = fork();
		if (k == 0) _exit(0);
		int st; waitpid(k, &st, 0);
		printf("quiet child: %d\n", WIFEXITED(st) ? WEXITSTATUS(st) : -WTERMSIG(st));
		k = fork();
		if (k == 0) _exit(a[4096] == 8 ? 0 : 1);
		waitpid(k, &st, 0);
		printf("touching child: %s\n", WIFSIGNALED(st) ? strsignal(WTERMSIG(st)) : "exited");
	}
	a = realloc(a, 96 * MB);
	fill(a + 64 * MB, 32 * MB, 4);
	printf("a %d b %d c %d a2 %d usable %d\n", check(a, 64 * MB, 1), check(b, 32 * MB, 2), check(c, 48 * MB, 3),
		check(a + 64 * MB, 32 * MB, 4), malloc_usable_size(a) >= 96 * MB);
	free(a); free(b); free(c);
	return 0;
}
`

// setup builds the library and the program, and starts a daemon (in a
// process of its own when separate).
func setup(t *testing.T, separate bool) (dir, sock, lib, bin string, kill func()) {
	if os.Geteuid() != 0 {
		if f, err := os.OpenFile("/dev/userfaultfd", os.O_RDWR, 0); err != nil {
			t.Skip("no userfaultfd for this user")
		} else {
			f.Close()
		}
	}
	cc, err := exec.LookPath("cc")
	if err != nil {
		t.Skip("no C compiler")
	}
	dir = t.TempDir()
	lib, bin = filepath.Join(dir, Library), filepath.Join(dir, "prog")
	src, _ := filepath.Abs("../../../clients/preload/s4d_run.c")
	for _, args := range [][]string{
		{"-O2", "-fPIC", "-shared", "-Wall", "-Werror", "-o", lib, src, "-ldl", "-lpthread"},
		{"-O2", "-x", "c", "-o", bin, "-"},
	} {
		cmd := exec.Command(cc, args...)
		cmd.Stdin = strings.NewReader(prog)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("cc: %v\n%s", err, out)
		}
	}
	sock = filepath.Join(dir, "s.sock")
	if separate {
		d := exec.Command(os.Args[0])
		d.Env = append(os.Environ(), "S4D_RUNCMD_HELPER=daemon", "S4D_SOCKET="+sock)
		if err := d.Start(); err != nil {
			t.Fatal(err)
		}
		kill = func() { d.Process.Kill(); d.Wait() }
		t.Cleanup(kill)
		daemonProc = d
	} else {
		go serve(sock)
	}
	for dl := time.Now().Add(time.Minute); ; time.Sleep(20 * time.Millisecond) {
		if _, err := (&client.Client{Socket: sock}).Hello(context.Background()); err == nil {
			break
		}
		if time.Now().After(dl) {
			t.Fatal("the daemon did not come up")
		}
	}
	return dir, sock, lib, bin, kill
}

// daemonProc is the daemon setup started last in a process of its own.
var daemonProc *exec.Cmd

// s4dRun returns `s4d run flags -- prog args` as a command.
func s4dRun(sock, lib string, flags []string, argv ...string) *exec.Cmd {
	args := append(append([]string{"--socket", sock, "--library", lib}, flags...), "--")
	cmd := exec.Command(os.Args[0], append(args, argv...)...)
	cmd.Env = append(os.Environ(), "S4D_RUNCMD_HELPER=run")
	return cmd
}

func TestRunProgram(t *testing.T) {
	_, sock, lib, bin, _ := setup(t, false)
	want, err := exec.Command(bin).Output()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd := s4dRun(sock, lib, []string{"--resident", "16M", "--min-size", "16M"}, bin)
	cmd.Stderr = &stderr
	got, err := cmd.Output()
	if err != nil || !bytes.Equal(got, want) || stderr.Len() > 0 {
		t.Fatalf("s4d run: %v\n%s\nwant\n%s\nstderr: %s", err, got, want, stderr.String())
	}
	if !strings.Contains(string(got), "a 1 b 1 c 1 a2 1 usable 1") {
		t.Fatalf("program: %s", got)
	}
	// Its allocations were regions: their pool exists, and is empty now.
	pools, err := (&client.Client{Socket: sock}).Pools(context.Background())
	if err != nil || len(pools) != 1 || !strings.HasPrefix(pools[0].Name, "(regions") || pools[0].Pages != 0 {
		t.Fatalf("pools after the run: %+v %v", pools, err)
	}
}

// TestRunFork: a child that leaves the parent's regions alone is fine; one
// that touches them faults (SIGSEGV), never reads zeros; the parent's data
// is intact either way.
func TestRunFork(t *testing.T) {
	_, sock, lib, bin, _ := setup(t, false)
	out, err := s4dRun(sock, lib, []string{"--resident", "16M", "--min-size", "16M"}, bin, "fork").CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	for _, want := range []string{"quiet child: 0", "touching child: Segmentation fault", "a 1 b 1 c 1 a2 1"} {
		if !strings.Contains(string(out), want) {
			t.Fatalf("want %q in:\n%s", want, out)
		}
	}
}

func TestRunDryRun(t *testing.T) {
	_, sock, lib, bin, _ := setup(t, false)
	out, err := s4dRun(sock, lib, []string{"--dry-run", "--min-size", "40M"}, bin).CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	s := string(out)
	if !strings.Contains(s, "would back 67108864 bytes (malloc)") || !strings.Contains(s, "(posix_memalign)") || strings.Contains(s, "(calloc)") {
		t.Fatalf("dry run said:\n%s", s)
	}
}

func TestRunRefusesClearly(t *testing.T) {
	dir := t.TempDir()
	lib := filepath.Join(dir, Library)
	os.WriteFile(lib, nil, 0o644)
	out, err := s4dRun(filepath.Join(dir, "nobody.sock"), lib, nil, "true").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "not reachable") {
		t.Fatalf("%v: %s", err, out)
	}
	out, err = s4dRun(filepath.Join(dir, "nobody.sock"), lib, nil).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "no command") {
		t.Fatalf("%v: %s", err, out)
	}
}

// TestRunDaemonKilled: the program is stopped with a message, not handed
// zeros, when the daemon holding its pages dies.
func TestRunDaemonKilled(t *testing.T) {
	_, sock, lib, bin, kill := setup(t, true)
	cmd := s4dRun(sock, lib, []string{"--resident", "8M", "--min-size", "16M"}, bin, "loop")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	b := make([]byte, 7)
	if _, err := out.Read(b); err != nil || string(b) != "filled\n" {
		t.Fatalf("program: %q %v %s", b, err, stderr.String())
	}
	time.Sleep(200 * time.Millisecond) // some pages evicted, some faulting back
	kill()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		ee, ok := err.(*exec.ExitError)
		if !ok || ee.ExitCode() != 70 || !strings.Contains(stderr.String(), "went away") {
			t.Fatalf("program ended with %v; stderr %q", err, stderr.String())
		}
	case <-time.After(time.Minute):
		t.Fatal("the program still runs a minute after the daemon died")
	}
}

// TestRunNumPy: a Python program's NumPy arrays, 256 MiB each, under
// --resident 64M give the same results as without.
func TestRunNumPy(t *testing.T) {
	if exec.Command("python3", "-c", "import numpy").Run() != nil {
		t.Skip("no python3 with numpy")
	}
	dir, sock, lib, _, _ := setup(t, false)
	script := filepath.Join(dir, "np.py")
	os.WriteFile(script, []byte(`import numpy as np
n = 256 << 20
a = np.arange(n // 8, dtype=np.int64)
b = (a * 3) % 1000
b[::4096] = 7
c = np.zeros(n // 8, dtype=np.int64)
c[1::97] = a[1::97]
print(int(a.sum()), int(b.sum()), int(c.sum()), int(np.sort(b[:1 << 20])[-5:].sum()))
`), 0o644)
	want, err := exec.Command("python3", script).Output()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd := s4dRun(sock, lib, []string{"--resident", "64M"}, "python3", script)
	cmd.Stderr = &stderr
	got, err := cmd.Output()
	if err != nil || !bytes.Equal(got, want) || stderr.Len() > 0 {
		t.Fatalf("%v: %s want %s; stderr %s", err, got, want, stderr.String())
	}
}

// TestRunDaemonStopped: a daemon that stops cleanly hands the program's
// regions back whole; the program goes on with every byte it wrote.
func TestRunDaemonStopped(t *testing.T) {
	_, sock, lib, bin, _ := setup(t, true)
	d := daemonProc
	cmd := s4dRun(sock, lib, []string{"--resident", "8M", "--min-size", "16M"}, bin, "wait")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	in, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	r := bufio.NewReader(out)
	if line, err := r.ReadString('\n'); err != nil || line != "filled\n" {
		t.Fatalf("program: %q %v %s", line, err, stderr.String())
	}
	time.Sleep(200 * time.Millisecond) // some pages evicted
	d.Process.Signal(syscall.SIGTERM)
	if err := d.Wait(); err != nil {
		t.Fatalf("daemon: %v", err)
	}
	in.Write([]byte("\n"))
	rest, _ := io.ReadAll(r)
	if err := cmd.Wait(); err != nil || !strings.Contains(string(rest), "a 1 b 1 c 1 a2 1 usable 1") {
		t.Fatalf("program after the daemon stopped: %v; stdout %q; stderr %q", err, rest, stderr.String())
	}
}
