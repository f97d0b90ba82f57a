package main

import (
	"strings"
	"testing"
)

// Flags given after a command's arguments are read as flags (issue 42:
// `s4d swap on /dev/ublkb0 --socket S` was refused); what follows "--",
// and `s4d run`'s command line, are left as they are.
func TestFlagsFirst(t *testing.T) {
	app := newApp()
	for _, c := range []struct{ in, want string }{
		{"s4d swap on /dev/ublkb0 --socket S", "s4d swap on --socket S /dev/ublkb0"},
		{"s4d swap del /dev/ublkb0 --socket=S --timeout 5s", "s4d swap del --socket=S --timeout 5s /dev/ublkb0"},
		{"s4d ctl --socket S writeback idle --age 10m", "s4d ctl --socket S writeback idle --age 10m"}, // idle is a subcommand
		{"s4d ctl codec zstd --pool P", "s4d ctl codec --pool P zstd"},
		{"s4d ctl put --pool p --file -", "s4d ctl put --pool p --file -"},
		{"s4d ctl pool export P --socket S", "s4d ctl pool export --socket S P"},
		{"s4d swap del --all", "s4d swap del --all"},
		{"s4d ctl del a -- --pool", "s4d ctl del a -- --pool"},
		{"s4d run python3 -c print(1)", "s4d run python3 -c print(1)"},
		{"s4d run --resident 128M -- python3 -c x", "s4d run --resident 128M -- python3 -c x"},
		{"s4d daemon --persist=true", "s4d daemon --persist=true"},
		{"s4d", "s4d"},
		// Booleans take true or false everywhere, as the daemon's do.
		{"s4d ctl stats --json false --socket S", "s4d ctl stats --json=false --socket S"},
		{"s4d swap off --unless-kept true /dev/ublkb0", "s4d swap off --unless-kept=true /dev/ublkb0"},
		{"s4d swap off /dev/ublkb0 --unless-kept true", "s4d swap off --unless-kept=true /dev/ublkb0"},
		{"s4d ctl codec --pool true zstd", "s4d ctl codec --pool true zstd"},
	} {
		if got := strings.Join(flagsFirst(app, strings.Fields(c.in)), " "); got != c.want {
			t.Errorf("%q: got %q, want %q", c.in, got, c.want)
		}
	}
}

// A renamed command keeps its old name, hidden: `s4d ctl del` and
// `s4d swap del` still run delete.
func TestOldNames(t *testing.T) {
	app := newApp()
	for _, path := range [][2]string{{"ctl", "del"}, {"swap", "del"}} {
		p := find(app.Commands, path[0])
		old, cur := find(p.Subcommands, path[1]), find(p.Subcommands, "delete")
		if old == nil || cur == nil || !old.Hidden || cur.Hidden || old.UsageText != cur.UsageText {
			t.Errorf("%s %s: old %v, new %v", path[0], path[1], old, cur)
		}
	}
	newApp() // once more: no second copy
	n := 0
	for _, c := range find(app.Commands, "ctl").Subcommands {
		if c.Name == "del" {
			n++
		}
	}
	if n != 1 {
		t.Errorf("%d copies of ctl del", n)
	}
}
