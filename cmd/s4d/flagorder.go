package main

import (
	"strings"

	"github.com/urfave/cli/v2"
)

// flagsFirst moves the flags of the command being run ahead of its
// arguments, so that `s4d swap on /dev/ublkb0 --socket S` parses as it
// reads: urfave/cli v2 stops reading flags at a command's first argument
// and would take "--socket" for a second device. Everything after "--"
// stays where it is, and so does every argument of `s4d run`, which is
// another program's command line (its own flags must come before it).
func flagsFirst(app *cli.App, args []string) []string {
	out := append([]string(nil), args...)
	flags := app.Flags
	subs := app.Commands
	i := 1
	// Walk down the command path: parents' flags and their values, then
	// each subcommand's name.
	var leaf *cli.Command
	for i < len(out) {
		a := out[i]
		if a == "--" {
			return out
		}
		if isFlag(a) {
			out = joinBool(flags, out, i)
			i += 1 + flagValues(flags, out[i])
			continue
		}
		c := find(subs, a)
		if c == nil {
			break // the first argument of the command found so far
		}
		leaf, flags, subs = c, c.Flags, c.Subcommands
		i++
	}
	if leaf == nil || leaf.Name == "run" || leaf.SkipFlagParsing || i >= len(out) {
		return out
	}
	var fl, pos []string
	rest := out[i:]
	for j := 0; j < len(rest); j++ {
		a := rest[j]
		if a == "--" {
			pos = append(pos, rest[j:]...)
			break
		}
		if !isFlag(a) {
			pos = append(pos, a)
			continue
		}
		rest = joinBool(flags, rest, j)
		a = rest[j]
		n := min(flagValues(flags, a), len(rest)-j-1)
		fl = append(fl, rest[j:j+1+n]...)
		j += n
	}
	return append(append(out[:i:i], fl...), pos...)
}

// joinBool makes a boolean flag followed by "true" or "false" one word
// ("--json false" -> "--json=false"), so that every boolean takes a value
// as the daemon's do ("--persist true"), and urfave/cli does not take the
// word for an argument. It returns args with at most that change at i.
func joinBool(flags []cli.Flag, args []string, i int) []string {
	a := args[i]
	if strings.Contains(a, "=") || i+1 >= len(args) || args[i+1] != "true" && args[i+1] != "false" {
		return args
	}
	name := strings.TrimLeft(a, "-")
	for _, f := range flags {
		if _, ok := f.(*cli.BoolFlag); !ok {
			continue
		}
		for _, n := range f.Names() {
			if n == name {
				return append(append(args[:i:i], a+"="+args[i+1]), args[i+2:]...)
			}
		}
	}
	return args
}

// isFlag: "-" alone is an argument (stdin), as is anything not dashed.
func isFlag(a string) bool { return len(a) > 1 && strings.HasPrefix(a, "-") }

// flagValues is how many words after a the flag takes: one for a flag
// with a value not attached by "=", none otherwise (unknown flags too:
// urfave reports them).
func flagValues(flags []cli.Flag, a string) int {
	name := strings.TrimLeft(a, "-")
	if strings.Contains(name, "=") {
		return 0
	}
	for _, f := range flags {
		for _, n := range f.Names() {
			if n == name {
				if d, ok := f.(cli.DocGenerationFlag); ok && d.TakesValue() {
					return 1
				}
				return 0
			}
		}
	}
	return 0
}

func find(cmds []*cli.Command, name string) *cli.Command {
	for _, c := range cmds {
		if c.HasName(name) {
			return c
		}
	}
	return nil
}

// oldNames are commands renamed so that one concept has one name across
// the CLI, the configuration and the clients (issue 42: delete, as the
// Python client says): the old name still runs, hidden from help, man
// pages and completion.
var oldNames = map[string]string{"ctl delete": "del", "swap delete": "del"}

// addOldNames adds a hidden copy of each renamed command under its old
// name; it runs once per app (newApp builds a fresh one each time).
func addOldNames(app *cli.App) {
	for path, old := range oldNames {
		parent, name, _ := strings.Cut(path, " ")
		p := find(app.Commands, parent)
		if p == nil || find(p.Subcommands, old) != nil {
			continue
		}
		if c := find(p.Subcommands, name); c != nil {
			alias := *c
			alias.Name, alias.Hidden = old, true
			p.Subcommands = append(p.Subcommands, &alias)
		}
	}
}
