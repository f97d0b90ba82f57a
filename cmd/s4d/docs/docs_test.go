package docs

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"

	_ "github.com/s4d-project/s4d/backends/cpu" // registers "cpu", as the binary does
	"github.com/s4d-project/s4d/settings"
)

// s4d.toml(5) has an entry for every setting of the table the flags come
// from, none for hidden ones, renders cleanly, and its example uses keys
// that exist; Write installs it under man5.
func TestConfigPage(t *testing.T) {
	dir := t.TempDir()
	if err := Write(&cli.App{Name: "s4d"}, dir); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "man5", "s4d.toml.5"))
	if err != nil {
		t.Fatal(err)
	}
	page := string(b)
	if !strings.Contains(page, ".TH S4D.TOML 5 ") {
		t.Errorf("not a section 5 page: %.60q", page)
	}
	for _, s := range settings.Table {
		entry := `\fB` + s.Key() + `\fP`
		if s.Hidden == strings.Contains(page, entry) {
			t.Errorf("%s: hidden %v, in the page %v", s.Key(), s.Hidden, !s.Hidden)
		}
		if !s.Hidden && !strings.Contains(page, `\fB--`+s.Name+`\fP`) {
			t.Errorf("%s: its option --%s is not named", s.Key(), s.Name)
		}
	}
	// The example loads as the daemon would load it (its backing file
	// aside: Validate checks that it exists).
	example := filepath.Join(dir, "example.toml")
	os.WriteFile(example, []byte(strings.Replace(configExample, "persist = true\n", "", 1)), 0o644)
	if c, err := settings.Load(example, true, map[string]string{"backing-file": ""}); err != nil || len(c.Swap) != 1 {
		t.Errorf("the example does not load: %v (%d swap tables)", err, len(c.Swap))
	}
	for _, k := range settings.SwapKeys {
		if !strings.Contains(page, `\fB`+k.Key+`\fP`) && !strings.Contains(page, `\fB`+strings.ReplaceAll(k.Key, "_", `\_`)+`\fP`) {
			t.Errorf("[[swap]] key %s is not in the page", k.Key)
		}
	}
	// The keys a reload changes are named, from the table.
	var reload []string
	for _, s := range settings.Table {
		if s.Reload {
			reload = append(reload, s.Key())
		}
	}
	if want := "at once: " + strings.Join(reload, ", ") + ";"; !strings.Contains(strings.Join(strings.Fields(strings.NewReplacer(`\fB`, "", `\fP`, "", `\_`, "_").Replace(page)), " "), want) {
		t.Errorf("the page does not list the reload keys %q", want)
	}
	if groff, err := exec.LookPath("groff"); err == nil {
		out, err := exec.Command(groff, "-man", "-Tutf8", "-ww", "-z", filepath.Join(dir, "man5", "s4d.toml.5")).CombinedOutput()
		if err != nil || len(out) > 0 {
			t.Errorf("groff: %v %s", err, out)
		}
	}
}

// testApp has the shapes the real CLI has: a listing with --output and
// its columns in the Description, --backend and --codec flags, a
// true/false string flag, and a command whose argument is a choice.
func testApp() *cli.App {
	return &cli.App{Name: "s4d", Commands: []*cli.Command{
		{Name: "daemon", Flags: []cli.Flag{
			&cli.StringFlag{Name: "backend", Value: "auto", Usage: "auto, or a backend to prefer: cpu, webgpu, cuda"},
			&cli.StringFlag{Name: "codec", Value: "lz4", Usage: "lz4 or zstd"},
			&cli.StringFlag{Name: "persist", Value: "false", Usage: "keep pages"},
			&cli.StringFlag{Name: "backing-file", Usage: "a file"},
		}},
		{Name: "ctl", Subcommands: []*cli.Command{
			{Name: "pools", Description: "Columns:\n  POOL  the pool\n  RATIO  its ratio\n  PAGES  its pages",
				Flags: []cli.Flag{&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Usage: "columns to print"}}},
			{Name: "codec", UsageText: "s4d ctl codec --pool P lz4|zstd|default",
				Flags: []cli.Flag{&cli.StringFlag{Name: "pool", Usage: "the pool"}}},
		}},
		{Name: "bench", Flags: []cli.Flag{
			&cli.StringFlag{Name: "backend", Value: "all", Usage: "cpu, webgpu, cuda or all"},
			&cli.StringFlag{Name: "codec", Value: "both", Usage: "lz4, zstd or both"},
		}},
	}}
}

// Values complete in bash, zsh and fish: columns (a comma list, in any
// case, after + or earlier names), backends from the registry, codecs
// from the parser, true/false, a command's argument; other values are
// file names.
func TestCompletionValues(t *testing.T) {
	dir := t.TempDir()
	if err := Write(testApp(), dir); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		words []string
		want  string // bash's COMPREPLY, space-separated
	}{
		{[]string{"s4d", "ctl", "pools", "--output", ""}, "POOL RATIO PAGES"},
		{[]string{"s4d", "ctl", "pools", "-o", "p"}, "POOL PAGES"},
		{[]string{"s4d", "ctl", "pools", "-o", "POOL,ra"}, "POOL,RATIO"},
		{[]string{"s4d", "ctl", "pools", "-o", "+RA"}, "+RATIO"},
		{[]string{"s4d", "daemon", "--backend", ""}, "cpu auto"},
		{[]string{"s4d", "daemon", "--codec", ""}, "lz4 zstd"},
		{[]string{"s4d", "daemon", "--persist", "t"}, "true"},
		{[]string{"s4d", "daemon", "--backing-file", ""}, ""}, // files, by bash itself
		{[]string{"s4d", "bench", "--backend", ""}, "cpu all"},
		{[]string{"s4d", "bench", "--codec", "b"}, "both"},
		{[]string{"s4d", "ctl", "codec", "--pool", "x", "z"}, "zstd"},
	}
	script := `source "$1"; shift; COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); _s4d; echo "${COMPREPLY[*]}"`
	for _, c := range cases {
		out, err := exec.Command("bash", append([]string{"-c", script, "_", filepath.Join(dir, "bash", "s4d")}, c.words...)...).CombinedOutput()
		if got := strings.TrimSpace(string(out)); err != nil || got != c.want {
			t.Errorf("bash %q: %q (%v), want %q", c.words, got, err, c.want)
		}
	}

	// zsh: its completion functions stubbed to print what they are given.
	if _, err := exec.LookPath("zsh"); err == nil {
		stubs := `compadd() { [[ $1 == - ]] && shift; print -r -- "$@" }; _sequence() { "$@" }; _files() { print FILES }
_describe() { print -r -- "${items[@]}" }; source "$1" >/dev/null 2>&1; shift; words=("$@"); CURRENT=$#; _s4d`
		for _, c := range []struct {
			words []string
			want  string
		}{
			{[]string{"s4d", "ctl", "pools", "-o", ""}, "POOL RATIO PAGES"},
			{[]string{"s4d", "daemon", "--backend", ""}, "cpu auto"},
			{[]string{"s4d", "bench", "--codec", ""}, "lz4 zstd both"},
			{[]string{"s4d", "daemon", "--backing-file", ""}, "FILES"},
		} {
			out, err := exec.Command("zsh", append([]string{"-c", stubs, "_", filepath.Join(dir, "zsh", "_s4d")}, c.words...)...).CombinedOutput()
			if got := strings.TrimSpace(string(out)); err != nil || got != c.want {
				t.Errorf("zsh %q: %q (%v), want %q", c.words, got, err, c.want)
			}
		}
	}
	// fish completes a command line itself.
	if _, err := exec.LookPath("fish"); err == nil {
		for _, c := range []struct{ line, want string }{
			{"s4d ctl pools -o POOL,R", "POOL,RATIO"},
			{"s4d daemon --codec ", "lz4 zstd"},
			{"s4d ctl codec --pool x ", "default lz4 zstd"},
			{"s4d bench --backend ", "all cpu"},
		} {
			out, err := exec.Command("fish", "-c", `source $argv[1]; complete -C $argv[2]`, filepath.Join(dir, "fish", "s4d.fish"), c.line).CombinedOutput()
			var got []string
			for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
				got = append(got, strings.Split(l, "\t")[0])
			}
			if err != nil || strings.Join(got, " ") != c.want {
				t.Errorf("fish %q: %q (%v), want %q", c.line, got, err, c.want)
			}
		}
	}
}
