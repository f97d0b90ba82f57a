package tests

import (
	"os"
	"os/user"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/s4d-project/s4d/backends/corpus"
)

// What a new user types, and what comes back: each malformed value is a
// usage error (exit 2) with a message that says what is wrong, and the
// forms the README uses work (issue 26).
func TestUsageAsDocumented(t *testing.T) {
	d := start(t, "--mem-limit", "1.5G") // a fractional size
	dir := t.TempDir()
	odd := filepath.Join(dir, "odd")
	os.WriteFile(odd, make([]byte, 5000), 0o644)
	page := filepath.Join(dir, "page")
	os.WriteFile(page, corpus.Pages(corpus.Text, 1, 4096, 1), 0o644)
	sock := filepath.Join(dir, "x.sock")
	daemon := []string{"daemon", "--socket", sock}
	for _, c := range []struct {
		args []string
		want int
		says string
	}{
		{[]string{"ctl", "--socket", d.socket, "put", "--pool", "bad pool", "--file", page}, 2, `--pool "bad pool"`},
		{[]string{"ctl", "--socket", d.socket, "get", "--pool", strings.Repeat("p", 129), "--keys", "0", "--out", "-"}, 2, "pool name"},
		{[]string{"ctl", "--socket", d.socket, "put", "--pool", "p", "--file", odd}, 2, "not a whole number of 4096-byte pages"},
		{append(daemon, "--page-size", "5000"), 2, "page size 5000"},
		{append(daemon, "--metrics-listen", "0.0.0.0:9367"), 2, "loopback"},
		{append(daemon, "--mem-limit", "1.5Q"), 2, "--mem-limit"},
		// Alone and with a value, as the README writes it: both reach the
		// check that persist needs a backing file.
		{append(daemon, "--persist"), 2, "persist needs a backing file"},
		{append(daemon, "--persist", "true"), 2, "persist needs a backing file"},
		{append(daemon, "--persist", "--backing-file", filepath.Join(dir, "none")), 1, "does not exist"},
		{[]string{"ctl", "--socket", dir, "stats"}, 5, "is a directory"},
	} {
		out, code := exitOf(t, -1, c.args...)
		if code != c.want || !strings.Contains(out, c.says) {
			t.Errorf("s4d %s: exit %d, want %d saying %q\n%s", strings.Join(c.args, " "), code, c.want, c.says, out)
		}
	}
	if out := d.mustCtl("stats", "--output", "mem-limit", "--bytes", "--noheadings"); strings.TrimSpace(out) != "1610612736" {
		t.Errorf("--mem-limit 1.5G: the daemon's limit is %q", out)
	}

	// The usage line shows an order that works, and that order works.
	if out, _ := exitOf(t, -1, "ctl", "writeback", "--help"); !strings.Contains(out, "writeback [all | huge | idle [--age AGE] | compact]") {
		t.Errorf("writeback --help:\n%s", out)
	}
	b := start(t, "--mem-limit", "64M", "--backing-file", backingFile(t, 16<<20), "--persist")
	b.mustCtl("put", "--pool", "p", "--file", page)
	for _, args := range [][]string{{"writeback", "idle", "--age", "10m"}, {"writeback", "--age", "10m", "idle"}, {"writeback", "huge"}} {
		if out := b.mustCtl(args...); !regexp.MustCompile(`^wrote back \d+ pages`).MatchString(out) {
			t.Errorf("ctl %s: %s", strings.Join(args, " "), out)
		}
	}
	if out := b.mustCtl("stats", "--json"); !regexp.MustCompile(`"persist":\s*true`).MatchString(out) {
		t.Errorf("--persist alone did not turn persist on:\n%s", out)
	}

	if os.Getuid() != 0 {
		return
	}
	// Permission denied names the group to join: for a socket of root's
	// group, the packaged one (s4d); for another group, that group.
	if out, code := exitOf(t, 4242, "ctl", "--socket", d.socket, "stats"); code != 4 ||
		!strings.Contains(out, "only root may use this socket") || !strings.Contains(out, "group s4d") || strings.Contains(out, "systemctl start") {
		t.Errorf("stats as a stranger on a root:root socket: exit %d\n%s", code, out)
	}
	os.Chown(d.socket, 0, 4343)
	group := "4343"
	if g, err := user.LookupGroupId(group); err == nil {
		group = g.Name
	}
	if out, code := exitOf(t, 4242, "ctl", "--socket", d.socket, "stats"); code != 4 || !strings.Contains(out, "join group "+group) {
		t.Errorf("stats as a stranger on a socket of group %s: exit %d\n%s", group, code, out)
	}
}
