package tests

import (
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
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

// The README is a front page (issue 42): at most 200 lines, and its set-up
// block still names the command CI runs (.ci/run calls make test).
func TestDocsReadmeFrontPage(t *testing.T) {
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(b), "\n"); n > 200 {
		t.Errorf("README.md has %d lines; the front page keeps to 200 (the rest goes to docs/)", n)
	}
	setUp := false
	for _, blk := range fencedBlocks(string(b)) {
		if blk.lang == "sh" && strings.Contains(blk.body, "make run") && strings.Contains(blk.body, "make test") {
			setUp = true
		}
	}
	if !setUp {
		t.Error("README.md has no sh block with the set-up commands make run and make test")
	}
}

// mdLink is a Markdown link's target: [text](target).
var mdLink = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// Every relative link in the README, CONTRIBUTING.md and docs/ names a file
// or directory that exists, so moving a page cannot leave one dangling.
func TestDocsLinks(t *testing.T) {
	files := []string{"../README.md", "../CONTRIBUTING.md", "../CHANGELOG.md"}
	filepath.WalkDir("../docs", func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".md") {
			files = append(files, p)
		}
		return nil
	})
	if len(files) < 10 {
		t.Fatalf("only %d pages found", len(files))
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range mdLink.FindAllStringSubmatch(string(b), -1) {
			target, _, _ := strings.Cut(m[1], "#")
			if target == "" || strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			if _, err := os.Stat(filepath.Join(filepath.Dir(f), target)); err != nil {
				t.Errorf("%s links to %s, which does not exist", strings.TrimPrefix(f, "../"), m[1])
			}
		}
	}
}

// docs/reference/metrics.md lists every series the metrics package
// defines, and none it does not.
func TestDocsMetricsReference(t *testing.T) {
	ref, err := os.ReadFile("../docs/reference/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	defined := map[string]bool{}
	srcs, _ := filepath.Glob("../metrics/*.go")
	def := regexp.MustCompile(`\bdesc\("([a-z0-9_]+)"`)
	for _, f := range srcs {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, _ := os.ReadFile(f)
		for _, m := range def.FindAllStringSubmatch(string(b), -1) {
			defined["s4d_"+m[1]] = true
		}
	}
	if len(defined) < 20 {
		t.Fatalf("found only %d series in metrics/", len(defined))
	}
	listed := map[string]bool{}
	for _, m := range regexp.MustCompile("\\| `(s4d_[a-z0-9_]+)`").FindAllStringSubmatch(string(ref), -1) {
		listed[m[1]] = true
	}
	for n := range defined {
		if !listed[n] {
			t.Errorf("%s is not in docs/reference/metrics.md", n)
		}
	}
	for n := range listed {
		if !defined[n] {
			t.Errorf("docs/reference/metrics.md lists %s, which metrics/ does not define", n)
		}
	}
}

// block is one fenced code block of a Markdown page: its language, its
// text, and the docs-test marker just above it, if any.
type block struct {
	lang, body, marker string
	line               int
}

func fencedBlocks(page string) []block {
	var out []block
	lines := strings.Split(page, "\n")
	for i := 0; i < len(lines); i++ {
		lang, ok := strings.CutPrefix(lines[i], "```")
		if !ok || lang == "" {
			continue
		}
		b := block{lang: strings.Fields(lang)[0], line: i + 1}
		if i > 0 {
			if m, ok := strings.CutPrefix(lines[i-1], "<!-- docs-test: "); ok {
				b.marker = strings.TrimSuffix(m, " -->")
			}
		}
		var body []string
		for i++; i < len(lines) && lines[i] != "```"; i++ {
			body = append(body, lines[i])
		}
		b.body = strings.Join(body, "\n")
		out = append(out, b)
	}
	return out
}

// The README's quick starts, and the CLI tour they link to, run as written
// against a daemon of their own (issue 42: they cannot rot). A block marked
// <!-- docs-test: guest|gpu|skip (why) --> is not run here, and says why:
// swap at boot needs root, ublk and systemd as PID 1 (the guest tests and
// TestSwapUnitUnderSystemd cover that path). Console blocks run their "$ "
// lines; their printed output is an example, not compared.
func TestDocsQuickStarts(t *testing.T) {
	dir := t.TempDir()
	os.Chmod(dir, 0o755)
	os.MkdirAll(filepath.Join(dir, "bin"), 0o755)
	if err := os.Symlink(s4dBin, filepath.Join(dir, "bin", "s4d")); err != nil {
		t.Fatal(err)
	}
	socket := filepath.Join(dir, "run", "s4d.sock")
	startOn(t, socket)
	py, _ := filepath.Abs("../clients/python")
	env := append(os.Environ(), "S4D_SOCKET="+socket, "PYTHONPATH="+py)
	ran := 0
	for _, page := range []string{"../README.md", "../docs/guides/cli-tour.md"} {
		b, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		for _, blk := range fencedBlocks(string(b)) {
			where := fmt.Sprintf("%s:%d", strings.TrimPrefix(page, "../"), blk.line)
			var cmd *exec.Cmd
			switch {
			case blk.marker != "":
				t.Logf("%s: not run here: %s", where, blk.marker)
				continue
			case blk.lang == "sh":
				cmd = exec.Command("bash", "-euo", "pipefail", "-c", blk.body)
			case blk.lang == "console":
				var lines []string
				for _, l := range strings.Split(blk.body, "\n") {
					if c, ok := strings.CutPrefix(l, "$ "); ok {
						lines = append(lines, c)
					}
				}
				cmd = exec.Command("bash", "-euo", "pipefail", "-c", strings.Join(lines, "\n"))
			case blk.lang == "python":
				if exec.Command("python3", "-c", "import numpy").Run() != nil {
					t.Logf("%s: not run here: no NumPy", where)
					continue
				}
				cmd = exec.Command("python3", "-c", blk.body)
			default:
				continue
			}
			if strings.Contains(blk.body, "import lz4") && exec.Command("python3", "-c", "import lz4.block").Run() != nil {
				t.Logf("%s: not run here: no python3-lz4 (make deps installs it)", where)
				continue
			}
			cmd.Dir, cmd.Env = dir, env
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Errorf("%s: %v\n%s\n%s", where, err, blk.body, out)
			}
			ran++
		}
	}
	if ran < 1 {
		t.Error("no quick-start block ran")
	}
}
