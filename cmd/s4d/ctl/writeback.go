package ctl

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/s4d-project/s4d/client"
	"github.com/s4d-project/s4d/cmd/s4d/exitcode"
	"github.com/s4d-project/s4d/ipc"
)

var ageFlag = &cli.DurationFlag{Name: "age", Usage: "idle: pages untouched for at least this long"}

// writebackCommand takes its mode as a subcommand, so that the mode's own
// flag may follow it ("writeback idle --age 10m"): urfave/cli stops
// reading a command's flags at its first argument. --age is also taken
// before the mode, as it was.
var writebackCommand = &cli.Command{
	Name:      "writeback",
	Usage:     "move pages to the backing file now (root only)",
	UsageText: "s4d ctl writeback [all | huge | idle [--age AGE] | compact]",
	Description: "all: every page with stored bytes; idle: pages untouched for --age, or without it\n" +
		"those marked idle (s4d ctl idle --mark) or idle for 63 epochs;\n" +
		"huge: pages stored raw (incompressible); compact: pack the backing file's sparse blocks\n" +
		"together, so that their space is reused whole. The default is all.",
	Flags: withSocket(ageFlag),
	Action: func(cx *cli.Context) error {
		if cx.NArg() > 0 {
			return exitcode.UsageErr(fmt.Errorf("writeback mode %q: want all, idle, huge or compact", cx.Args().First()))
		}
		return writeback(cx, ipc.WritebackAll)
	},
	Subcommands: []*cli.Command{
		writebackMode(ipc.WritebackAll, "every page with stored bytes (the default)"),
		writebackMode(ipc.WritebackHuge, "pages stored raw (incompressible)"),
		writebackMode(ipc.WritebackIdle, "pages untouched for --age, or without it those marked idle or idle for 63 epochs", ageFlag),
		writebackMode(ipc.WritebackCompact, "pack the backing file's sparse blocks together"),
	},
}

func writebackMode(mode, usage string, flags ...cli.Flag) *cli.Command {
	return &cli.Command{
		Name:            mode,
		Usage:           usage,
		HideHelpCommand: true,
		UsageText:       "s4d ctl writeback " + mode + map[bool]string{true: " [--age AGE]"}[len(flags) > 0],
		Flags:           withSocket(flags...),
		Action: func(cx *cli.Context) error {
			if cx.NArg() > 0 {
				return exitcode.UsageErr(fmt.Errorf("writeback takes one mode, got %q too", cx.Args().Slice()))
			}
			return writeback(cx, mode)
		},
	}
}

// writeback runs one mode; --age is the innermost one given.
func writeback(cx *cli.Context, mode string) error {
	var age time.Duration
	aged := false
	for _, c := range cx.Lineage() {
		if c.IsSet("age") {
			age, aged = c.Duration("age"), true
			break
		}
	}
	if aged && (mode != ipc.WritebackIdle || age < 0) {
		return exitcode.UsageErr(fmt.Errorf("--age goes with idle, and cannot be negative"))
	}
	return withClient(func(ctx context.Context, c *client.Client) error {
		r, err := c.Writeback(ctx, ipc.WritebackRequest{Mode: mode, MinAge: age})
		if err != nil {
			return err
		}
		if mode == ipc.WritebackCompact {
			fmt.Printf("moved %d pages within the backing file\n", r.Pages)
		} else {
			fmt.Printf("wrote back %d pages (%s)\n", r.Pages, human(r.Bytes))
		}
		return nil
	})(cx)
}

// backingTable is the backing file, one row, as zram's bd_stat and more.
var backingTable = &table[*ipc.BackingStats]{
	name:     "backing",
	defaults: strings.Fields("BACKING-FILE SIZE FREE PAGES STORED READS PAGES-READ WRITES PAGES-WRITTEN READ-MEAN-US READ-P99-US FAILED FULL"),
	columns: []column[*ipc.BackingStats]{
		{"BACKING-FILE", "the backing file", text, func(b *ipc.BackingStats) any { return b.Path }},
		{"SIZE", "its size", size, func(b *ipc.BackingStats) any { return b.Size }},
		{"FREE", "bytes free for new pages", size, func(b *ipc.BackingStats) any { return b.FreeBytes }},
		{"PAGES", "pages on the file", count, func(b *ipc.BackingStats) any { return b.Pages }},
		{"STORED", "their bytes", size, func(b *ipc.BackingStats) any { return b.StoredBytes }},
		{"READS", "read I/Os", count, func(b *ipc.BackingStats) any { return b.Reads }},
		{"PAGES-READ", "pages read back", count, func(b *ipc.BackingStats) any { return b.PagesRead }},
		{"WRITES", "write I/Os", count, func(b *ipc.BackingStats) any { return b.Writes }},
		{"PAGES-WRITTEN", "pages written", count, func(b *ipc.BackingStats) any { return b.PagesWritten }},
		{"READ-MEAN-US", "mean time of a read I/O", float, func(b *ipc.BackingStats) any { return b.ReadMeanUS }},
		{"READ-P99-US", "99th percentile of a read I/O (a power of two)", count, func(b *ipc.BackingStats) any { return b.ReadP99US }},
		{"FAILED", "writeback rounds failed by an I/O error (their pages stayed in RAM)", count, func(b *ipc.BackingStats) any { return b.Failures }},
		{"FULL", "writeback rounds that found the file full", count, func(b *ipc.BackingStats) any { return b.FullRounds }},
		{"PERSIST", "whether pages outlive a planned restart", text, func(b *ipc.BackingStats) any { return fmt.Sprint(b.Persist) }},
		{"CHECKPOINTS", "checkpoints of the file's index", count, func(b *ipc.BackingStats) any { return b.Checkpoints }},
		{"ERROR", "the last error", text, func(b *ipc.BackingStats) any { return oneLine(b.LastError) }},
	},
}
