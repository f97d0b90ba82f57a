package tests

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/s4d-project/s4d/ipc"
)

// Under systemd, with a backing file and persist: `systemctl restart`
// (SIGTERM, then a start that reports ready only once the pages are
// back) keeps every page, and they are there the moment it returns.
func TestUnderSystemdPersist(t *testing.T) {
	g := bootGuest(t)
	g.must("systemd-sysusers")
	// The file where the README puts it: the unit's StateDirectory makes
	// /var/lib/s4d writable for the daemon, no drop-in needed.
	g.must("sh", "-c", "mkdir -p /var/lib/s4d && fallocate -l 64M /var/lib/s4d/backing && chown -R s4d:s4d /var/lib/s4d")
	g.must("sh", "-c", `sed -i 's/^mem_limit = .*/mem_limit = "4M"/' /etc/s4d/s4d.toml && printf 'backing_file = "/var/lib/s4d/backing"\npersist = true\n' >> /etc/s4d/s4d.toml`)
	g.must("systemctl", "daemon-reload")
	g.must("systemctl", "start", "s4d.socket")

	g.must("sh", "-c", "head -c 16777216 /usr/local/bin/s4d > /tmp/pages")
	g.must("s4d", "ctl", "put", "--pool", "kept", "--file", "/tmp/pages")
	g.must("s4d", "ctl", "get", "--pool", "kept", "--keys", "0-4095", "--out", "/tmp/back")
	g.must("cmp", "/tmp/pages", "/tmp/back")
	var st ipc.Stats
	if err := json.Unmarshal([]byte(g.must("s4d", "ctl", "stats", "--json")), &st); err != nil {
		t.Fatal(err)
	}
	if st.Backing == nil || st.Backing.Pages == 0 || st.IO.NoSpace != 0 {
		t.Fatalf("past the 4M limit: %d refused, backing file %+v", st.IO.NoSpace, st.Backing)
	}

	if out := strings.TrimSpace(g.must("stat", "-c", "%U %a", "/var/lib/s4d")); out != "s4d 700" {
		t.Fatalf("/var/lib/s4d under the service: %q, want the unit's StateDirectory (s4d, 0700)", out)
	}

	g.must("systemctl", "restart", "s4d")
	g.must("s4d", "ctl", "get", "--pool", "kept", "--keys", "0-4095", "--out", "/tmp/back2")
	g.must("cmp", "/tmp/pages", "/tmp/back2")
	out := g.must("journalctl", "-u", "s4d", "--no-pager")
	if !strings.Contains(out, "pages persisted") || !strings.Contains(out, "pages_restored=4096") {
		t.Fatalf("no persist and restore in the journal:\n%s", out)
	}
}
