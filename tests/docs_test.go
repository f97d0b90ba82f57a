package tests

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/s4d-project/s4d/settings"
)

// The example configuration says which keys a reload changes: exactly the
// settings table's Reload ones (it once listed three of five).
func TestDocsReloadKeys(t *testing.T) {
	b, err := os.ReadFile("../systemd/s4d.toml")
	if err != nil {
		t.Fatal(err)
	}
	var listed []string
	for _, l := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(l, "# reload: "); ok {
			listed = strings.Fields(rest)
		}
	}
	var want []string
	for _, s := range settings.Table {
		if s.Reload {
			want = append(want, s.Key())
		}
	}
	if strings.Join(listed, " ") != strings.Join(want, " ") {
		t.Errorf("systemd/s4d.toml's '# reload:' line lists %q; the settings table reloads %q", listed, want)
	}
	// The nvCOMP the example names is the one make install-nvcomp installs.
	mk, err := os.ReadFile("../mk/cuda.mk")
	if err != nil {
		t.Fatal(err)
	}
	major := ""
	for _, l := range strings.Split(string(mk), "\n") {
		if v, ok := strings.CutPrefix(l, "NVCOMP_WHEEL  ?= nvidia-libnvcomp-cu13=="); ok {
			major, _, _ = strings.Cut(v, ".")
		}
	}
	if major == "" || !strings.Contains(string(b), "libnvcomp.so."+major+`"`) {
		t.Errorf("systemd/s4d.toml does not name libnvcomp.so.%s, the nvCOMP make install-nvcomp installs", major)
	}
}

// `make install` puts in place what the Debian package ships for swap,
// and the package gets it from the same rule (make -n: nothing is run).
func TestDocsInstallSwap(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("no make")
	}
	for _, c := range []struct {
		target string
		want   []string
	}{
		{"install", []string{"/usr/local/lib/systemd/system/s4d-swap@.service", "/etc/udev/rules.d/60-s4d-swap.rules",
			"s4d-swap.conf.example", "s4d-swap.modules-load.example"}},
		{"deb", []string{"install-swap"}},
	} {
		out, err := exec.Command("make", "-C", "..", "-n", "--no-print-directory", c.target, "DESTDIR=/nonexistent").CombinedOutput()
		if err != nil {
			t.Fatalf("make -n %s: %v\n%s", c.target, err, out)
		}
		for _, w := range c.want {
			if !strings.Contains(string(out), w) {
				t.Errorf("make %s does not install %s", c.target, w)
			}
		}
	}
}
