package tests

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"github.com/s4d-project/s4d/backends/corpus"
)

// exitOf runs the binary and returns its output and exit status.
func exitOf(t *testing.T, uid int, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(s4dBin, args...)
	if uid >= 0 {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(uid)}}
	}
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return string(out), ee.ExitCode()
	}
	if err != nil {
		t.Fatal(err)
	}
	return string(out), 0
}

func TestVersion(t *testing.T) {
	out, code := exitOf(t, -1, "--version")
	if code != 0 || !regexp.MustCompile(`^s4d version \S+ \(commit \S+, built \S+, go1\.\S+\)\n$`).MatchString(out) {
		t.Fatalf("s4d --version: %d %q", code, out)
	}
}

// The documented exit statuses: 2 usage, 3 not found, 4 permission,
// 5 daemon unreachable.
func TestExitCodes(t *testing.T) {
	d := start(t)
	page := filepath.Join(t.TempDir(), "p")
	os.WriteFile(page, corpus.Pages(corpus.Text, 2, 4096, 1), 0o644)
	d.mustCtl("put", "--pool", "p", "--file", page)
	sock := []string{"ctl", "--socket", d.socket}
	for _, c := range []struct {
		args []string
		want int
	}{
		{[]string{"--no-such-flag"}, 2},
		{[]string{"ctl", "no-such-command"}, 2},
		{append(sock, "get", "--pool", "p"), 2},                                // a required flag missing
		{append(sock, "get", "--pool", "p", "--keys", "9-1", "--out", "-"), 2}, // a malformed value
		{append(sock, "stats", "--output", "data,bogus"), 2},
		{append(sock, "inspect", "--pool", "nope", "--keys", "0"), 3},
		{append(sock, "get", "--pool", "p", "--keys", "5", "--out", "-"), 3},
		{[]string{"ctl", "--socket", filepath.Join(t.TempDir(), "none.sock"), "stats"}, 5},
		{append(sock, "inspect", "--pool", "p", "--keys", "0-1"), 0},
	} {
		out, code := exitOf(t, -1, c.args...)
		if code != c.want {
			t.Errorf("s4d %s: exit %d, want %d\n%s", strings.Join(c.args, " "), code, c.want, out)
		}
	}
	if os.Getuid() == 0 {
		// The socket is 0660 root:root here: another user may not connect.
		if out, code := exitOf(t, 4242, append(sock, "stats")...); code != 4 {
			t.Errorf("stats as a stranger: exit %d, want 4\n%s", code, out)
		}
	}
}

func TestListingFlags(t *testing.T) {
	d := start(t)
	page := filepath.Join(t.TempDir(), "p")
	os.WriteFile(page, corpus.Pages(corpus.Zero, 3, 4096, 1), 0o644)
	d.mustCtl("put", "--pool", "zeros", "--file", page)

	out := d.mustCtl("stats", "--output", "pages,data,zero-pages", "--bytes", "--raw", "--noheadings")
	if out != "3 12288 3\n" {
		t.Fatalf("stats --output --bytes --raw --noheadings: %q", out)
	}
	out, code := exitOf(t, -1, "ctl", "--socket", d.socket, "pools", "--output", "nosuch")
	if code != 2 || !strings.Contains(out, "POOL") || !strings.Contains(out, "HUGE") {
		t.Fatalf("unknown column should list the valid ones: %d %s", code, out)
	}
	var pools struct{ Pools []map[string]any }
	if err := json.Unmarshal([]byte(d.mustCtl("pools", "--json")), &pools); err != nil || len(pools.Pools) != 1 || pools.Pools[0]["zero"] != 3.0 {
		t.Fatalf("pools --json: %v %+v", err, pools)
	}
	var pages struct{ Pages []map[string]any }
	if err := json.Unmarshal([]byte(d.mustCtl("inspect", "--pool", "zeros", "--keys", "0-2", "--json", "-o", "key,class")), &pages); err != nil ||
		len(pages.Pages) != 3 || pages.Pages[2]["class"] != "zero" || pages.Pages[2]["key"] != 2.0 {
		t.Fatalf("inspect --json: %v %+v", err, pages)
	}

	// Not on a terminal, watch prints one aligned line per interval.
	out = d.mustCtl("watch", "--interval", "100ms", "--count", "3", "--output", "time,pages,in-pages/s")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 4 || !strings.HasPrefix(lines[0], "TIME") || strings.Contains(out, "\x1b") {
		t.Fatalf("watch:\n%s", out)
	}
	if f := strings.Fields(lines[3]); len(f) != 3 || f[1] != "3" {
		t.Fatalf("watch line %q", lines[3])
	}

	// On a terminal (script(1) gives it one) the view is redrawn in place,
	// the store and each busy engine on a line of their own.
	if script, err := exec.LookPath("script"); err == nil {
		b, err := exec.Command(script, "-qec", s4dBin+" ctl --socket "+d.socket+" watch -i 100ms -c 2", "/dev/null").CombinedOutput()
		out := string(b)
		if err != nil || strings.Count(out, "\x1b[H\x1b[2J") != 2 || !strings.Contains(out, "ENGINE") ||
			!regexp.MustCompile(`(?m)^all +3 `).MatchString(out) || !regexp.MustCompile(`(?m)^cpu +- `).MatchString(out) {
			t.Fatalf("watch on a terminal: %v\n%q", err, out)
		}
	}
}
