// Package docs writes s4d's man pages and its bash, zsh and fish
// completion from the CLI's own definitions, so they cannot drift from
// the flags the binary takes.
package docs

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/s4d-project/s4d/settings"
)

// node is one command of the tree, the root included.
type node struct {
	path  []string // "s4d", "ctl", "stats"
	usage string
	text  string // UsageText
	desc  string // Description
	flags []flagDoc
	subs  []*node
}

// flagDoc is what the man pages and completions say about a flag.
type flagDoc struct {
	names []string // long name first, then aliases
	value bool     // takes a value
	meta  string   // its placeholder (SIZE, PATH); "" = value
	usage string
	def   string
	env   []string
}

func (n *node) name() string { return strings.Join(n.path, " ") }

// page is the man page's name: s4d-ctl-stats.
func (n *node) page() string { return strings.Join(n.path, "-") }

// section is n's manual section: 8 for what an administrator runs as root
// to run the system (s4d daemon, s4d swap and its subcommands), as
// zramctl(8) and swapon(8) are; 1 for the rest.
func (n *node) section() int {
	if len(n.path) > 1 && (n.path[1] == "daemon" || n.path[1] == "swap") {
		return 8
	}
	return 1
}

// ref is n as a man page reference: **s4d-ctl-stats**(1).
func (n *node) ref() string { return fmt.Sprintf("**%s**(%d)", n.page(), n.section()) }

func flagsOf(fs []cli.Flag) []flagDoc {
	var out []flagDoc
	for _, f := range fs {
		if v, ok := f.(cli.VisibleFlag); ok && !v.IsVisible() {
			continue
		}
		d := flagDoc{names: f.Names()}
		if g, ok := f.(cli.DocGenerationFlag); ok {
			d.value, d.usage, d.env = g.TakesValue(), g.GetUsage(), g.GetEnvVars()
			if m, rest := Placeholder(d.usage); m != "" {
				d.meta, d.usage = m, rest
			}
			d.def = g.GetDefaultText()
			if d.def == "" && d.value {
				d.def = g.GetValue()
			}
			if d.def == `""` || !d.value && d.def == "false" {
				d.def = ""
			}
		}
		out = append(out, d)
	}
	return out
}

// tree walks app's visible commands; --help and --version are added as
// the binary adds them.
func tree(app *cli.App) *node {
	help := flagDoc{names: []string{"help", "h"}, usage: "show help"}
	root := &node{path: []string{app.Name}, usage: app.Usage, text: app.UsageText, desc: app.Description,
		flags: append(flagsOf(app.VisibleFlags()), help, flagDoc{names: []string{"version", "v"}, usage: "print the version, commit and build date"})}
	var walk func(parent *node, cmds []*cli.Command)
	walk = func(parent *node, cmds []*cli.Command) {
		for _, c := range cmds {
			if c.Hidden {
				continue
			}
			n := &node{path: append(append([]string{}, parent.path...), c.Name), usage: c.Usage, text: c.UsageText,
				desc: c.Description, flags: append(flagsOf(c.Flags), help)}
			if len(n.path) == 2 && c.Name == "daemon" {
				fullUsage(n.flags)
			}
			parent.subs = append(parent.subs, n)
			walk(n, c.Subcommands)
		}
	}
	walk(root, app.Commands)
	return root
}

// all lists the tree's nodes, parents before children.
func (n *node) all() []*node {
	out := []*node{n}
	for _, s := range n.subs {
		out = append(out, s.all()...)
	}
	return out
}

// Write puts the commands' man pages in dir/man1 and dir/man8, the configuration
// file's in dir/man5 and the completion scripts in dir/bash, dir/zsh and
// dir/fish.
func Write(app *cli.App, dir string) error {
	root := tree(app)
	for _, sub := range []string{"man1", "man5", "man8", "bash", "zsh", "fish"} {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o755); err != nil {
			return err
		}
	}
	for _, n := range root.all() {
		sec := fmt.Sprint(n.section())
		if err := os.WriteFile(filepath.Join(dir, "man"+sec, n.page()+"."+sec), manPage(root, n), 0o644); err != nil {
			return err
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "man5", "s4d.toml.5"), configPage(), 0o644); err != nil {
		return err
	}
	for file, body := range map[string]string{"bash/s4d": bash(root), "zsh/_s4d": zsh(root), "fish/s4d.fish": fish(root)} {
		if err := os.WriteFile(filepath.Join(dir, file), []byte(body), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// Placeholder splits a usage string that starts with its placeholder in
// back quotes ("`SIZE` of RAM for ...") into the placeholder and the text
// after it; urfave/cli shows the placeholder after the flag's name, and
// the text should not say it again.
func Placeholder(usage string) (meta, rest string) {
	if !strings.HasPrefix(usage, "`") {
		return "", usage
	}
	m, r, ok := strings.Cut(usage[1:], "`")
	if !ok || m == "" {
		return "", usage
	}
	return m, strings.TrimLeft(r, " :")
}

// FlagStringer wraps urfave/cli's: a flag's help line without its
// placeholder repeated at the start of the text.
func FlagStringer(orig cli.FlagStringFunc) cli.FlagStringFunc {
	return func(f cli.Flag) string {
		s := orig(f)
		d, ok := f.(cli.DocGenerationFlag)
		if !ok {
			return s
		}
		m, _ := Placeholder(d.GetUsage())
		name, text, ok := strings.Cut(s, "\t")
		if m == "" || !ok {
			return s
		}
		return name + "\t" + strings.TrimLeft(strings.TrimPrefix(text, m), " :")
	}
}

// fullUsage gives the daemon's setting flags their whole text from the
// settings table: --help shows a line or two, the man page and the
// reference say everything.
func fullUsage(flags []flagDoc) {
	for i, f := range flags {
		if st := settings.Find(f.names[0]); st != nil && st.Name == f.names[0] {
			flags[i].usage = st.Usage
			if st.Bool {
				flags[i].usage += "; true or false, the option alone means true"
			}
		}
	}
}
