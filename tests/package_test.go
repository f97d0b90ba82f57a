package tests

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// buildDeb runs `make deb` for version and returns the package's path.
func buildDeb(t *testing.T, version string) string {
	t.Helper()
	// Without -buildmode=pie the build reuses the compiled packages of
	// the other tests' plain builds (PIE recompiles everything: 40 s here);
	// gzip packs in 2 s where xz takes 11.
	out, err := exec.Command("make", "-C", "..", "--no-print-directory", "deb", "VERSION="+version, "DEB_BUILDFLAGS=", "DEB_COMPRESS=gzip").CombinedOutput()
	if err != nil {
		t.Fatalf("make deb: %v\n%s", err, out)
	}
	arch, _ := exec.Command("dpkg", "--print-architecture").Output()
	deb, _ := filepath.Abs(fmt.Sprintf("../bin/s4d_%s_%s.deb", version, strings.TrimSpace(string(arch))))
	if _, err := os.Stat(deb); err != nil {
		t.Fatal(err)
	}
	return deb
}

// The Debian package, in a throw-away systemd root: installed with dpkg -i
// it enables s4d.socket, which answers; upgraded over itself it keeps a
// changed config and the running daemon's pages; purged it leaves nothing.
func TestDebianPackage(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("booting systemd in a namespace needs root")
	}
	for _, tool := range []string{"dpkg-deb", "objdump"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not available: %v", tool, err)
		}
	}
	// Built once the guest is known to boot here (bootGuestWith skips first).
	g := bootGuestWith(t, func(t *testing.T, inject string) {
		start := time.Now()
		debs := []string{buildDeb(t, "0.1.0+test1"), buildDeb(t, "0.1.0+test2")}
		t.Logf("built %s in %v", filepath.Base(debs[1]), time.Since(start).Round(time.Second))
		if lintian, err := exec.LookPath("lintian"); err == nil {
			out, err := exec.Command(lintian, "--fail-on", "error", debs[1]).CombinedOutput()
			if err != nil {
				t.Fatalf("lintian: %v\n%s", err, out)
			}
			t.Logf("lintian: no errors\n%s", out)
		}
		dir := filepath.Join(inject, "opt/s4d-test")
		os.MkdirAll(dir, 0o755)
		for _, deb := range debs {
			if b, err := os.ReadFile(deb); err == nil {
				os.WriteFile(filepath.Join(dir, filepath.Base(deb)), b, 0o644)
			}
		}
	})
	step := func(args ...string) string {
		t.Helper()
		out := g.must(args...)
		t.Logf("$ %s\n%s", strings.Join(args, " "), strings.TrimRight(out, "\n"))
		return out
	}
	// What a `make install` on this host left would shadow the package's
	// units and config in the guest (the overlay hides it; the host keeps it).
	// A container image's policy-rc.d (exit 101) forbids starting services;
	// the guest is a whole system and must run the postinst as one does.
	g.must("sh", "-c", "rm -rf /usr/local/bin/s4d /usr/local/lib/systemd/system/s4d.* /usr/local/lib/sysusers.d/s4d.conf /etc/s4d "+
		"/usr/sbin/policy-rc.d")
	g.must("systemctl", "daemon-reload")
	// man-db's trigger rebuilds its index after every dpkg run: seconds
	// each, and nothing this test reads.
	g.must("sh", "-c", "echo 'man-db man-db/auto-update boolean false' | debconf-set-selections")

	step("dpkg", "-i", "/opt/s4d-test/s4d_0.1.0+test1_amd64.deb")
	socketUp := func(when string) {
		t.Helper()
		if out, _ := g.run("systemctl", "is-enabled", "s4d.socket"); strings.TrimSpace(out) != "enabled" {
			t.Fatalf("%s: s4d.socket is %q, want enabled", when, out)
		}
		if out, _ := g.run("systemctl", "is-active", "s4d.socket"); strings.TrimSpace(out) != "active" {
			t.Fatalf("%s: s4d.socket is %q, want active", when, out)
		}
	}
	socketUp("after install")
	step("systemctl", "show", "s4d", "-p", "FragmentPath", "-p", "User")
	step("getent", "passwd", "s4d")
	step("systemd-analyze", "verify", "/lib/systemd/system/s4d-metrics.socket")
	// The first connection starts the service.
	step("/usr/bin/s4d", "ctl", "stats", "--output", "algorithm,pages,data,mem-limit", "--bytes")

	// /metrics through s4d-metrics.socket: the sandboxed service has no
	// network, systemd passes it the port. The guest shares the host's
	// network, so the test moves it off the default port.
	port := freePort(t)
	g.must("sh", "-c", fmt.Sprintf("mkdir -p /etc/systemd/system/s4d-metrics.socket.d && "+
		"printf '[Socket]\\nListenStream=\\nListenStream=127.0.0.1:%d\\n' > /etc/systemd/system/s4d-metrics.socket.d/port.conf", port))
	step("systemctl", "daemon-reload")
	// systemd starts no socket whose service runs already.
	step("systemctl", "stop", "s4d.service")
	step("systemctl", "enable", "--now", "s4d-metrics.socket")
	scrape := func() string {
		t.Helper()
		out, err := g.run("python3", "-c", fmt.Sprintf("import urllib.request; print(urllib.request.urlopen('http://127.0.0.1:%d/metrics', timeout=10).read().decode())", port))
		if err != nil {
			t.Fatalf("scraping s4d-metrics.socket: %v\n%s", err, out)
		}
		return out
	}
	if out := scrape(); !strings.Contains(out, "\ns4d_stored_pages 0\n") {
		t.Fatalf("/metrics before any page:\n%s", out)
	}
	step("sh", "-c", "head -c 65536 /usr/bin/s4d > /tmp/pages && /usr/bin/s4d ctl put --pool pkg --file /tmp/pages")
	if out := scrape(); !strings.Contains(out, "\ns4d_stored_pages 16\n") || !strings.Contains(out, `s4d_pool_stored_pages{pool="pkg",uid="0"} 16`) {
		t.Fatalf("/metrics after 16 pages:\n%s", out)
	} else {
		t.Logf("/metrics through s4d-metrics.socket, excerpt:\n%s", grepLines(out, "s4d_stored_pages ", "s4d_pool_stored_pages", "s4d_engine_pages_total"))
	}
	step("test", "-f", "/usr/share/man/man1/s4d-ctl-stats.1.gz")
	step("test", "-f", "/usr/share/man/man5/s4d.toml.5.gz")
	step("test", "-d", "/var/lib/s4d") // the unit's StateDirectory, made when the service started
	step("test", "-f", "/usr/share/bash-completion/completions/s4d")

	// The admin changes the config; the upgrade keeps it, and the daemon
	// that was running keeps its pages.
	g.must("sed", "-i", `s/^mem_limit = .*/mem_limit = "64M"/`, "/etc/s4d/s4d.toml")
	step("dpkg", "-i", "/opt/s4d-test/s4d_0.1.0+test2_amd64.deb")
	if v := g.must("dpkg-query", "-W", "-f", "${Version}", "s4d"); v != "0.1.0+test2" {
		t.Fatalf("after the upgrade dpkg has %q", v)
	}
	if out := step("grep", "^mem_limit", "/etc/s4d/s4d.toml"); !strings.Contains(out, `"64M"`) {
		t.Fatalf("the upgrade lost the changed config: %s", out)
	}
	if _, err := g.run("sh", "-c", "ls /etc/s4d/*.dpkg-*"); err == nil {
		t.Fatal("the upgrade left .dpkg-* files for a config it should have kept silently")
	}
	socketUp("after the upgrade")
	if out := step("/usr/bin/s4d", "ctl", "pools", "--raw", "--noheadings", "--output", "pool,pages"); strings.TrimSpace(out) != "pkg 16" {
		t.Fatalf("pages after the upgrade: %q", out)
	}
	// s4d run's preload library is where the binary looks for it.
	step("test", "-f", "/usr/lib/s4d/libs4d-run.so")
	if out := step("/usr/bin/s4d", "--version"); !strings.Contains(out, "0.1.0+test2") {
		t.Fatalf("--version after the upgrade: %s", out)
	}

	files := strings.Fields(g.must("sh", "-c", `dpkg -L s4d | while read -r f; do [ -f "$f" ] && echo "$f"; done`))
	g.must("rm", "-r", "/etc/systemd/system/s4d-metrics.socket.d") // the test's own drop-in
	g.must("systemctl", "daemon-reload")
	step("dpkg", "--purge", "s4d")
	var left []string
	for _, f := range files {
		if _, err := g.run("test", "-e", f); err == nil {
			left = append(left, f)
		}
	}
	if out, _ := g.run("sh", "-c", "find /etc/s4d /etc/systemd /var/lib/systemd/deb-systemd-helper-enabled "+
		"/var/lib/systemd/deb-systemd-helper-masked /run/s4d /var/lib/s4d -name '*s4d*' 2>/dev/null; pgrep -x s4d"); strings.TrimSpace(out) != "" {
		left = append(left, strings.Fields(out)...)
	}
	if len(left) > 0 {
		t.Fatalf("the purge left behind: %v", left)
	}
	if out, _ := g.run("systemctl", "is-active", "s4d.socket", "s4d.service", "s4d-metrics.socket"); strings.Count(out, "inactive") != 3 {
		t.Fatalf("units still active after the purge: %s", out)
	}
	t.Logf("purged: none of the package's %d files, no unit links, no process and no socket remain", len(files))
}

// grepLines keeps the lines of text that start with one of prefixes.
func grepLines(text string, prefixes ...string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		for _, p := range prefixes {
			if strings.HasPrefix(l, p) {
				out = append(out, l)
				break
			}
		}
	}
	return strings.Join(out, "\n")
}
