package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"

	"github.com/s4d-project/s4d/cmd/s4d/docs"
)

// Every visible command gets a man page naming each of its flags, and the
// completion scripts parse and complete from the same definitions.
func TestDocsFromDefinitions(t *testing.T) {
	dir := t.TempDir()
	app := newApp()
	if err := docs.Write(app, dir); err != nil {
		t.Fatal(err)
	}
	var check func(prefix string, cmds []*cli.Command)
	check = func(prefix string, cmds []*cli.Command) {
		for _, c := range cmds {
			if c.Hidden { // old names (addOldNames), gen-docs
				continue
			}
			page := prefix + "-" + c.Name
			// Section 8 for what runs the system (daemon, swap), 1 for the rest.
			sec := "1"
			if strings.HasPrefix(page, "s4d-daemon") || strings.HasPrefix(page, "s4d-swap") {
				sec = "8"
			}
			b, err := os.ReadFile(filepath.Join(dir, "man"+sec, page+"."+sec))
			if err != nil {
				t.Errorf("no man page for %s: %v", page, err)
				continue
			}
			for _, f := range c.VisibleFlags() {
				name := f.Names()[0]
				if len(name) > 1 && !strings.Contains(string(b), `\fB--`+name+`\fP`) {
					t.Errorf("%s.1 does not document --%s", page, f.Names()[0])
				}
			}
			check(page, c.Subcommands)
		}
	}
	check("s4d", app.Commands)
	if _, err := os.Stat(filepath.Join(dir, "man1", "s4d.1")); err != nil {
		t.Fatal(err)
	}
	if groff, err := exec.LookPath("groff"); err == nil {
		pages, _ := filepath.Glob(filepath.Join(dir, "man[18]", "*.[18]"))
		for _, p := range pages {
			// -ww: every warning; a page must render cleanly.
			if out, err := exec.Command(groff, append([]string{"-man", "-Tutf8", "-ww", "-z"}, p)...).CombinedOutput(); err != nil || len(out) > 0 {
				t.Errorf("groff %s: %v %s", filepath.Base(p), err, out)
			}
		}
	}

	complete := func(words ...string) string {
		script := `source "$1"; shift; COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); _s4d; echo "${COMPREPLY[*]}"`
		out, err := exec.Command("bash", append([]string{"-c", script, "_", filepath.Join(dir, "bash", "s4d")}, words...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("bash completion: %v %s", err, out)
		}
		return strings.TrimSpace(string(out))
	}
	for _, c := range []struct{ words, want []string }{
		{[]string{"s4d", ""}, []string{"daemon ctl bench run swap --help -h --version -v"}},
		{[]string{"s4d", "ctl", "wa"}, []string{"watch"}},
		{[]string{"s4d", "ctl", "--socket", "/x", "stats", "--no"}, []string{"--noheadings"}},
		{[]string{"s4d", "daemon", "--metrics"}, []string{"--metrics-listen"}},
		{[]string{"s4d", "ctl", "put", "--file", ""}, []string{""}}, // files, by bash itself
	} {
		if got := complete(c.words...); got != c.want[0] {
			t.Errorf("complete %q = %q, want %q", c.words, got, c.want[0])
		}
	}
	for shell, file := range map[string]string{"zsh": "zsh/_s4d", "fish": "fish/s4d.fish"} {
		if _, err := exec.LookPath(shell); err != nil {
			continue
		}
		if out, err := exec.Command(shell, "-n", filepath.Join(dir, file)).CombinedOutput(); err != nil {
			t.Errorf("%s -n: %v %s", shell, err, out)
		}
	}
	// The daemon and swap pages are in section 8, with examples.
	for _, page := range []string{"s4d-daemon", "s4d-swap"} {
		b, err := os.ReadFile(filepath.Join(dir, "man8", page+".8"))
		if err != nil || !strings.Contains(string(b), ".TH "+strings.ToUpper(page)+" 8 ") || !strings.Contains(string(b), ".SH EXAMPLES") {
			t.Errorf("%s.8: not a section 8 page with EXAMPLES (%v)", page, err)
		}
		if fileExists(filepath.Join(dir, "man1", page+".1")) {
			t.Errorf("%s is in section 1 too", page)
		}
	}
	if hidden := filepath.Join(dir, "man1", "s4d-gen-docs.1"); fileExists(hidden) {
		t.Error("the hidden gen-docs command got a man page")
	}
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

// docs/reference/commands.md and config.md are what the binary writes
// from its definitions now: a changed flag or setting without
// `make docs-reference` fails here.
func TestReferenceCurrent(t *testing.T) {
	for name, want := range map[string]string{"commands.md": docs.CommandsMarkdown(newApp()), "config.md": docs.ConfigMarkdown()} {
		got, err := os.ReadFile(filepath.Join("..", "..", "docs", "reference", name))
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != want {
			t.Errorf("docs/reference/%s is out of date: run make docs-reference", name)
		}
	}
}
