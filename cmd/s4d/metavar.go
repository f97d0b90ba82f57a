package main

import (
	"strings"

	"github.com/urfave/cli/v2"
)

// metavars name what a flag of that name takes, so that --help and the man
// pages say `--keys KEYS`, not `--keys value` (issue 42). The daemon's
// settings carry theirs in their usage already (daemoncmd/flaghelp.go);
// a name missing here falls back to its type's (DURATION, N) or VALUE.
var metavars = map[string]string{
	"socket": "PATH", "file": "FILE", "out": "FILE", "raw-out": "DIR", "plot": "FILE", "library": "PATH",
	"pool": "POOL", "keys": "KEYS", "first-key": "KEY", "output": "COLS", "list": "N", "count": "N",
	"size": "SIZE", "reserve": "SIZE", "resident": "SIZE", "min-size": "SIZE", "max-bytes": "SIZE",
	"page-size": "BYTES", "queues": "N", "depth": "N", "priority": "N", "clients": "N", "repeat": "N",
	"batch": "LIST", "backend": "ENGINE", "codec": "CODEC", "synthetic": "KIND", "from-pid": "PID",
	"age": "DURATION", "interval": "DURATION", "timeout": "DURATION", "poll-wait": "DURATION",
	"out-dir": "DIR", "reference": "DIR",
}

// setMetavars puts each value flag's placeholder at the start of its usage
// in back quotes, where urfave/cli and cmd/s4d/docs read it; flags that
// have one already are left alone, so it may run more than once.
func setMetavars(cmds []*cli.Command) {
	for _, c := range cmds {
		for _, f := range c.Flags {
			var usage *string
			kind := "VALUE"
			switch f := f.(type) {
			case *cli.StringFlag:
				usage = &f.Usage
			case *cli.IntFlag:
				usage, kind = &f.Usage, "N"
			case *cli.UintFlag:
				usage, kind = &f.Usage, "N"
			case *cli.Uint64Flag:
				usage, kind = &f.Usage, "N"
			case *cli.DurationFlag:
				usage, kind = &f.Usage, "DURATION"
			}
			if usage == nil || strings.HasPrefix(*usage, "`") {
				continue
			}
			if m, ok := metavars[f.Names()[0]]; ok {
				kind = m
			}
			*usage = "`" + kind + "` " + *usage
		}
		setMetavars(c.Subcommands)
	}
}
