// Command s4d is the memory-compression daemon and its control tool.
package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/s4d-project/s4d/cmd/s4d/bench"
	"github.com/s4d-project/s4d/cmd/s4d/buildinfo"
	"github.com/s4d-project/s4d/cmd/s4d/ctl"
	"github.com/s4d-project/s4d/cmd/s4d/daemoncmd"
	"github.com/s4d-project/s4d/cmd/s4d/docs"
	"github.com/s4d-project/s4d/cmd/s4d/exitcode"
	"github.com/s4d-project/s4d/cmd/s4d/runcmd"
	"github.com/s4d-project/s4d/cmd/s4d/swapcmd"
	"github.com/s4d-project/s4d/settings"
)

// stringerSet: newApp runs more than once (gen-docs, tests); the help's
// flag stringer is wrapped once.
var stringerSet bool

func newApp() *cli.App {
	info := buildinfo.Get()
	app := &cli.App{
		Name:     "s4d",
		Usage:    "keep memory pages compressed in RAM, on the GPU or the CPU",
		Version:  info.Version,
		Commands: []*cli.Command{daemoncmd.Command, ctl.Command, bench.Command, runcmd.Command, swapcmd.Register(ctl.Command, daemoncmd.Command)},
		// Errors are printed once, as one line, by main.
		ExitErrHandler: func(*cli.Context, error) {},
	}
	addOldNames(app)
	setMetavars(app.Commands)
	cli.VersionPrinter = func(*cli.Context) { fmt.Println(info) }
	if !stringerSet {
		cli.FlagStringer, stringerSet = docs.FlagStringer(cli.FlagStringer), true
	}
	return app
}

func main() {
	app := newApp()
	app.Commands = append(app.Commands, genDocsCommand)
	entered := markActions(app.Commands)
	err := app.Run(flagsFirst(app, boolsAlone(os.Args)))
	// urfave/cli reports unknown flags, missing required flags and bad
	// values before any Action runs: whatever fails before one is entered
	// is a usage error.
	if err != nil && !*entered {
		err = exitcode.UsageErr(err)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "s4d:", err)
	}
	os.Exit(exitcode.Of(err))
}

// markActions wraps every command's Action to record that one was entered,
// and gives commands that only group others an Action that refuses an
// unknown subcommand (urfave/cli would print help and exit 0).
func markActions(cmds []*cli.Command) *bool {
	entered := new(bool)
	var walk func([]*cli.Command)
	walk = func(cmds []*cli.Command) {
		for _, c := range cmds {
			if c.Action == nil && len(c.Subcommands) > 0 {
				c.Action = groupAction
			}
			if act := c.Action; act != nil {
				c.Action = func(cx *cli.Context) error { *entered = true; return act(cx) }
			}
			walk(c.Subcommands)
		}
	}
	walk(cmds)
	return entered
}

func groupAction(cx *cli.Context) error {
	if cx.Args().Present() {
		return exitcode.UsageErr(fmt.Errorf("%s: unknown command %q (see '%s --help')", cx.Command.HelpName, cx.Args().First(), cx.Command.HelpName))
	}
	return cli.ShowSubcommandHelp(cx)
}

// genDocsCommand writes the man pages and completion scripts (`make docs`);
// hidden, as it is for packaging, not for users.
var genDocsCommand = &cli.Command{
	Name:   "gen-docs",
	Hidden: true,
	Usage:  "write man pages and shell completion from the CLI's definitions",
	Flags: []cli.Flag{&cli.StringFlag{Name: "out", Usage: "directory: man1/, man5/, bash/, zsh/, fish/ are made in it"},
		&cli.StringFlag{Name: "reference", Usage: "directory: commands.md and config.md (docs/reference) are written there"}},
	Action: func(cx *cli.Context) error {
		if !cx.IsSet("out") && !cx.IsSet("reference") {
			return exitcode.UsageErr(fmt.Errorf("gen-docs: --out DIR, --reference DIR or both"))
		}
		if dir := cx.String("reference"); dir != "" {
			for name, body := range map[string]string{"commands.md": docs.CommandsMarkdown(newApp()), "config.md": docs.ConfigMarkdown()} {
				if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
					return err
				}
			}
		}
		if dir := cx.String("out"); dir != "" {
			return docs.Write(newApp(), dir)
		}
		return nil
	},
}

// boolsAlone lets a boolean setting of `s4d daemon` be given alone
// ("--persist") as well as with a value ("--persist true", as the config
// file and the README write it). The settings are string flags, which
// want a value; urfave's bool flags would take the "true" of "--persist
// true" as an argument and stop reading flags there. So a boolean setting
// not followed by a true/false word becomes "--persist=true".
func boolsAlone(args []string) []string {
	isBool := map[string]bool{"help": true, "h": true}
	for _, s := range settings.Table {
		isBool[s.Name] = s.Bool
	}
	out := append([]string(nil), args...)
	cmd := 1
	for cmd < len(out) && strings.HasPrefix(out[cmd], "-") { // s4d's own flags are all bool
		cmd++
	}
	if cmd >= len(out) || out[cmd] != "daemon" {
		return out
	}
	for i := cmd + 1; i < len(out); i++ {
		a := out[i]
		if a == "--" {
			break
		}
		name := strings.TrimLeft(a, "-")
		if name == a || strings.Contains(name, "=") {
			continue // an argument, or a flag with its value attached
		}
		if !isBool[name] {
			i++ // the flag's value, whatever it looks like
			continue
		}
		if i+1 < len(out) {
			if _, err := strconv.ParseBool(out[i+1]); err == nil {
				i++
				continue
			}
		}
		if name != "help" && name != "h" {
			out[i] = a + "=true"
		}
	}
	return out
}
