package tests

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/s4d-project/s4d/ipc"
)

// guest is a systemd booted as PID 1 of its own PID namespace, in a
// throw-away overlay of / (tests/systemd/boot.sh).
type guest struct {
	t   *testing.T
	pid int
}

func (g *guest) run(args ...string) (string, error) {
	cmd := exec.Command("nsenter", append([]string{"-t", strconv.Itoa(g.pid), "-m", "-p", "-r", "-w"}, args...)...)
	cmd.Dir = "/"
	cmd.Env = withoutS4D(os.Environ())
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// withoutS4D drops the caller's S4D_ variables: in the guest, ctl must
// find the unit's socket, not one the caller's environment names.
func withoutS4D(env []string) []string {
	var out []string
	for _, kv := range env {
		if !strings.HasPrefix(kv, "S4D_") {
			out = append(out, kv)
		}
	}
	return out
}

func (g *guest) must(args ...string) string {
	g.t.Helper()
	out, err := g.run(args...)
	if err != nil {
		g.t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

func (g *guest) show(props ...string) map[string]string {
	g.t.Helper()
	out := g.must("systemctl", "show", "s4d", "-p", strings.Join(props, ","))
	m := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		k, v, _ := strings.Cut(l, "=")
		m[k] = v
	}
	return m
}

// waitFor polls cond for up to d.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("timed out waiting for %s", what)
}

// bootGuest boots a guest with s4d installed by `make install` under
// /usr/local, as a user installs from a checkout.
func bootGuest(t *testing.T) *guest { return bootGuestWith(t, installFromCheckout) }

func installFromCheckout(t *testing.T, inject string) {
	// Install exactly as a user would, into the overlay.
	if out, err := exec.Command("make", "-C", "..", "install", "DESTDIR="+inject, "PREFIX=/usr/local").CombinedOutput(); err != nil {
		t.Fatalf("make install: %v\n%s", err, out)
	}
	// The test build can fail its self-check on demand.
	if out, err := exec.Command("go", "build", "-tags", "s4dfault", "-o", filepath.Join(inject, "usr/local/bin/s4d"), "../cmd/s4d").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	dropin := filepath.Join(inject, "etc/systemd/system/s4d.service.d")
	os.MkdirAll(dropin, 0o755)
	os.WriteFile(filepath.Join(dropin, "test.conf"), []byte("[Service]\nEnvironment=S4D_FAULT_DIR=/run/s4d-fault\nWatchdogSec=3s\n"), 0o644)
}

// bootGuestWith boots a guest after prepare has put what it needs under
// inject, which is copied over the guest's root.
func bootGuestWith(t *testing.T, prepare func(t *testing.T, inject string)) *guest {
	if os.Getuid() != 0 {
		t.Skip("booting systemd in a namespace needs root")
	}
	for _, tool := range []string{"unshare", "nsenter", "/lib/systemd/systemd"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not available: %v", tool, err)
		}
	}
	if out, err := exec.Command("unshare", "--mount", "--pid", "--fork", "true").CombinedOutput(); err != nil {
		t.Skipf("cannot create mount and PID namespaces here: %v %s", err, out)
	}
	dir, err := os.MkdirTemp("", "s4d-systemd-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	inject := filepath.Join(dir, "inject")
	prepare(t, inject)

	log := &syncBuffer{}
	boot := exec.Command("systemd/boot.sh", dir)
	boot.Stdout, boot.Stderr = log, log
	boot.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := boot.Start(); err != nil {
		t.Fatal(err)
	}
	g := &guest{t: t}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("boot log:\n%s", log.String())
			if g.pid > 0 {
				out, _ := g.run("journalctl", "--no-pager", "-n", "60")
				t.Logf("journal:\n%s", out)
			}
		}
		// Killing the guest's PID 1 ends every process in it and, with the
		// last process of the mount namespace, every mount.
		if g.pid > 0 {
			syscall.Kill(g.pid, syscall.SIGKILL)
		}
		boot.Process.Kill()
		boot.Wait()
	})
	// systemd is the child of the unshare that made the PID namespace.
	waitFor(t, 20*time.Second, "systemd to start", func() bool {
		kids, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", boot.Process.Pid, boot.Process.Pid))
		if f := strings.Fields(string(kids)); len(f) > 0 {
			g.pid, _ = strconv.Atoi(f[0])
			comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", g.pid))
			return strings.TrimSpace(string(comm)) == "systemd"
		}
		return false
	})
	waitFor(t, 60*time.Second, "the guest to finish booting", func() bool {
		out, _ := g.run("systemctl", "is-system-running")
		s := strings.TrimSpace(out)
		return s == "running" || s == "degraded"
	})
	return g
}

func TestUnderSystemd(t *testing.T) {
	g := bootGuest(t)
	g.must("systemd-sysusers")
	g.must("systemctl", "daemon-reload")
	unit := "/usr/local/lib/systemd/system/"
	g.must("systemd-analyze", "verify", unit+"s4d.service", unit+"s4d.socket")
	security := g.must("systemd-analyze", "security", "--no-pager", "s4d.service")
	for _, l := range strings.Split(security, "\n") {
		if strings.Contains(l, "✗") || strings.Contains(l, "Overall") {
			t.Log(strings.Join(strings.Fields(l), " "))
		}
	}

	g.must("systemctl", "start", "s4d.socket")
	if st := g.show("ActiveState"); st["ActiveState"] != "inactive" {
		t.Fatalf("service started before anyone connected: %v", st)
	}
	// The first connection starts the service (socket activation).
	if out := g.must("s4d", "ctl", "stats"); !strings.Contains(out, "cpu") {
		t.Fatalf("stats through the socket: %s", out)
	}
	st := g.show("ActiveState", "SubState", "StatusText", "MainPID")
	if st["ActiveState"] != "active" || st["SubState"] != "running" || !strings.HasPrefix(st["StatusText"], "backend cpu, ") {
		t.Fatalf("service state %v", st)
	}
	if out := g.must("journalctl", "-u", "s4d", "--no-pager"); !strings.Contains(out, "using the socket passed by systemd") {
		t.Fatalf("not socket-activated:\n%s", out)
	}
	// The place the README gives a backing file: made by systemd, the
	// daemon's, closed to others (it would hold every user's pages).
	if sd := g.show("StateDirectory")["StateDirectory"]; sd != "s4d" {
		t.Fatalf("StateDirectory=%q, want s4d", sd)
	}
	if out := strings.TrimSpace(g.must("stat", "-c", "%U %G %a", "/var/lib/s4d")); out != "s4d s4d 700" {
		t.Fatalf("/var/lib/s4d: %q, want s4d s4d 700", out)
	}
	if _, err := g.run("test", "-e", "/usr/local/share/man/man5/s4d.toml.5"); err != nil {
		t.Fatal("make install put no s4d.toml(5) man page")
	}

	// Pages through the service, as root and as a member of nobody's world.
	g.must("sh", "-c", "head -c 4194304 /usr/local/bin/s4d > /tmp/pages && chmod 644 /tmp/pages")
	g.must("s4d", "ctl", "put", "--pool", "sd", "--file", "/tmp/pages")
	g.must("s4d", "ctl", "get", "--pool", "sd", "--keys", "0-1023", "--out", "/tmp/back")
	g.must("cmp", "/tmp/pages", "/tmp/back")
	waitFor(t, 15*time.Second, "the status line to count the pages", func() bool {
		return strings.Contains(g.show("StatusText")["StatusText"], "1024 pages stored")
	})

	// A changed mem limit applies on reload; a bad file keeps the old config.
	g.must("sh", "-c", `sed -i 's/^mem_limit = .*/mem_limit = "64M"/' /etc/s4d/s4d.toml`)
	g.must("systemctl", "reload", "s4d")
	memLimit := func() uint64 {
		var s ipc.Stats
		if err := json.Unmarshal([]byte(g.must("s4d", "ctl", "stats", "--json")), &s); err != nil {
			t.Fatal(err)
		}
		return s.Mem.MemLimit
	}
	waitFor(t, 10*time.Second, "the new mem limit", func() bool { return memLimit() == 64<<20 })
	g.must("sh", "-c", `echo 'no_such_setting = 1' >> /etc/s4d/s4d.toml`)
	g.must("systemctl", "reload", "s4d")
	waitFor(t, 10*time.Second, "the reload error in the journal", func() bool {
		out, _ := g.run("journalctl", "-u", "s4d", "--no-pager")
		return strings.Contains(out, "unknown setting no_such_setting")
	})
	if memLimit() != 64<<20 || g.show("ActiveState")["ActiveState"] != "active" {
		t.Fatal("a bad config file changed the running daemon")
	}
	g.must("sed", "-i", "/no_such_setting/d", "/etc/s4d/s4d.toml")

	// A failing self-check withholds the watchdog ping: systemd restarts it.
	pid := g.show("MainPID")["MainPID"]
	g.must("sh", "-c", "mkdir -p /run/s4d-fault && touch /run/s4d-fault/selfcheck")
	waitFor(t, 30*time.Second, "a watchdog restart", func() bool {
		s := g.show("MainPID", "NRestarts")
		return s["MainPID"] != pid && s["MainPID"] != "0" && s["NRestarts"] != "0"
	})
	g.must("rm", "/run/s4d-fault/selfcheck")
	out := g.must("journalctl", "-u", "s4d", "--no-pager")
	if !strings.Contains(out, "self-check failed") || !strings.Contains(strings.ToLower(out), "watchdog") {
		t.Fatalf("no watchdog trail in the journal:\n%s", out)
	}
	waitFor(t, 15*time.Second, "the restarted service", func() bool {
		_, err := g.run("s4d", "ctl", "stats")
		return err == nil && g.show("ActiveState")["ActiveState"] == "active"
	})

	g.must("systemctl", "stop", "s4d", "s4d.socket")
	waitFor(t, 15*time.Second, "no s4d process", func() bool {
		_, err := g.run("pgrep", "-x", "s4d")
		return err != nil
	})
	if _, err := g.run("test", "-e", "/run/s4d/s4d.sock"); err == nil {
		t.Fatal("socket file left behind after stop")
	}
}
