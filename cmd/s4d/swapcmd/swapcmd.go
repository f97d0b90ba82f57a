// Package swapcmd is `s4d swap` (add and delete the daemon's swap devices)
// and `s4d ctl swap` (list them with zramctl's columns). It talks to the
// daemon through its socket only; the daemon owns the devices.
package swapcmd

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/s4d-project/s4d/client"
	"github.com/s4d-project/s4d/cmd/s4d/ctl"
	"github.com/s4d-project/s4d/cmd/s4d/exitcode"
	"github.com/s4d-project/s4d/ipc"
	"github.com/s4d-project/s4d/settings/bytesize"
	"github.com/s4d-project/s4d/ublk"
)

var flags = []cli.Flag{
	// No EnvVars: see ctl's socketFlag; the client reads $S4D_SOCKET.
	&cli.StringFlag{Name: "socket", Usage: "daemon socket (default $S4D_SOCKET, else " + ipc.DefaultSocketPath + ")"},
	&cli.DurationFlag{Name: "timeout", Value: 60 * time.Second, Usage: "give up after this long"},
}

// Command is `s4d swap`.
var Command = &cli.Command{
	Name:  "swap",
	Usage: "add or delete swap devices served by the daemon (ublk; root only)",
	Description: "A swap device is a block device the daemon serves through the kernel's ublk driver\n" +
		"(Linux 6.0+, CONFIG_BLK_DEV_UBLK, module ublk_drv); its 4 KiB blocks are pages of a pool,\n" +
		"compressed by the daemon's engines. Make it swap with `mkswap DEV && swapon --discard DEV`\n" +
		"(discard lets freed swap slots free their pages). List them with `s4d ctl swap`.",
	Subcommands: []*cli.Command{addCommand, delCommand, onCommand, offCommand},
}

var addCommand = &cli.Command{
	Name:      "add",
	Usage:     "create a swap device and print its name",
	UsageText: "s4d swap add --size SIZE [--queues N] [--depth N] [--reserve SIZE] [--mem-limit SIZE [--writeback DIR|DEVICE]]",
	Flags: append([]cli.Flag{
		&cli.StringFlag{Name: "size", Required: true, Usage: "the device's size, bytes with K/M/G/T suffix (at least 1M)"},
		&cli.IntFlag{Name: "queues", Usage: "hardware queues, each served by its own thread; 0 = one per CPU"},
		&cli.IntFlag{Name: "depth", Usage: "requests in flight per queue; 0 = 64"},
		&cli.StringFlag{Name: "reserve", Usage: "memory kept ready for its compressed pages (once the machine swaps there is none to be had); default 12 MiB, doubled up to 128 MiB while writes find none"},
		&cli.StringFlag{Name: "mem-limit", Usage: "compressed bytes kept in RAM; past it the coldest pages are written back to --writeback, whole, and read from there when swapped in; default: none, every page stays in RAM"},
		&cli.StringFlag{Name: "writeback", Usage: "with --mem-limit: a directory on a disk, where an unnamed file as large as the device is made (sparse, gone with the device or the daemon), or a block device used whole; default the daemon's state directory (/var/lib/s4d)"},
	}, flags...),
	Action: func(cx *cli.Context) error {
		if cx.NArg() > 0 {
			return exitcode.UsageErr(fmt.Errorf("swap add takes no arguments, got %q", cx.Args().Slice()))
		}
		size, err := bytesize.Parse(cx.String("size"))
		if err != nil {
			return exitcode.UsageErr(fmt.Errorf("--size: %w", err))
		}
		if size < 1<<20 {
			return exitcode.UsageErr(fmt.Errorf("--size %s: want at least 1M", cx.String("size")))
		}
		q, depth := cx.Int("queues"), cx.Int("depth")
		if q < 0 || q > 64 || depth < 0 || depth > 1024 {
			return exitcode.UsageErr(fmt.Errorf("--queues wants 0-64 and --depth 0-1024"))
		}
		var reserve uint64
		if cx.IsSet("reserve") {
			if reserve, err = bytesize.Parse(cx.String("reserve")); err != nil {
				return exitcode.UsageErr(fmt.Errorf("--reserve: %w", err))
			}
		}
		var limit uint64
		if cx.IsSet("mem-limit") {
			if limit, err = bytesize.Parse(cx.String("mem-limit")); err != nil {
				return exitcode.UsageErr(fmt.Errorf("--mem-limit: %w", err))
			}
			if limit == 0 {
				return exitcode.UsageErr(fmt.Errorf("--mem-limit 0: leave it out to keep every page in RAM"))
			}
		}
		wb := cx.String("writeback")
		if wb != "" && limit == 0 {
			return exitcode.UsageErr(fmt.Errorf("--writeback needs --mem-limit: pages are written back only past a limit"))
		}
		if wb != "" && !filepath.IsAbs(wb) {
			// The daemon resolves paths from its own directory, not the caller's.
			if wb, err = filepath.Abs(wb); err != nil {
				return exitcode.UsageErr(fmt.Errorf("--writeback: %w", err))
			}
		}
		devs, err := call(cx, ipc.SwapRequest{Action: ipc.SwapAdd, Size: size, Queues: q, Depth: depth, Reserve: reserve, MemLimit: limit, Writeback: wb})
		if err != nil {
			return err
		}
		for _, d := range devs {
			fmt.Println(d.Name)
		}
		return nil
	},
}

var delCommand = &cli.Command{
	Name:      "delete",
	Usage:     "delete a swap device, or every one with --all; swapoff it first",
	UsageText: "s4d swap delete DEVICE | s4d swap delete --all",
	Flags:     append([]cli.Flag{&cli.BoolFlag{Name: "all", Usage: "delete every swap device of the daemon"}}, flags...),
	Action: func(cx *cli.Context) error {
		// A bare `swap del` (now delete) used to delete every device: too easy to type
		// by mistake for what it does, so all of them needs --all.
		all := cx.Bool("all")
		switch {
		case all && cx.NArg() > 0:
			return exitcode.UsageErr(fmt.Errorf("swap delete: a device or --all, not both (got %q)", cx.Args().Slice()))
		case !all && cx.NArg() != 1:
			return exitcode.UsageErr(fmt.Errorf("swap delete: name one device (e.g. /dev/ublkb0), or --all for every one; got %q", cx.Args().Slice()))
		}
		devs, err := call(cx, ipc.SwapRequest{Action: ipc.SwapDel, Device: cx.Args().First()})
		for _, d := range devs {
			fmt.Printf("deleted %s (%s)\n", d.Name, bytesize.Format(d.DiskSize))
		}
		return err
	},
}

// CtlCommand is `s4d ctl swap`.
var CtlCommand = &cli.Command{
	Name:        "swap",
	Usage:       "list swap devices, as zramctl does",
	UsageText:   "s4d ctl swap [--output COLS] [--noheadings] [--raw] [--bytes] [--json] [--batches]",
	Description: ctl.SwapColumns(),
	Flags: append(append(ctl.SwapListFlags(),
		&cli.BoolFlag{Name: "json", Usage: "print the daemon's description of each device as JSON"},
		&cli.BoolFlag{Name: "batches", Usage: "also print the requests, ring waits and store calls served"},
	), flags...),
	Action: func(cx *cli.Context) error {
		devs, err := call(cx, ipc.SwapRequest{Action: ipc.SwapList})
		if err != nil {
			return err
		}
		if cx.Bool("json") {
			return printJSON(os.Stdout, devs)
		}
		if err := ctl.PrintSwap(cx, os.Stdout, devs, ublk.ActiveSwaps()); err != nil {
			return err
		}
		if cx.Bool("batches") {
			printBatches(os.Stdout, devs)
		}
		return nil
	},
}

// socketOf is the innermost --socket set, on this command or a parent.
func socketOf(cx *cli.Context) string {
	for _, c := range cx.Lineage() {
		if c.IsSet("socket") {
			return c.String("socket")
		}
	}
	return ""
}

func timeoutOf(cx *cli.Context) time.Duration {
	for _, c := range cx.Lineage() {
		if c.IsSet("timeout") {
			return c.Duration("timeout")
		}
	}
	return 60 * time.Second
}

func call(cx *cli.Context, req ipc.SwapRequest) ([]ipc.SwapDevice, error) {
	ctx, cancel := context.WithTimeout(cx.Context, timeoutOf(cx))
	defer cancel()
	c := &client.Client{Socket: socketOf(cx)}
	defer c.Close()
	return c.Swap(ctx, req)
}

// printBatches shows the gathering: requests per wait, pages per call.
func printBatches(w io.Writer, devs []ipc.SwapDevice) {
	for _, d := range devs {
		fmt.Fprintf(w, "%s: %d requests in %d waits; writes %d calls/%d pages, reads %d calls/%d pages\n",
			d.Name, d.Requests, d.Waits, d.WriteIOs, d.WritePgs, d.ReadIOs, d.ReadPgs)
	}
}

func printJSON(w io.Writer, devs []ipc.SwapDevice) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(devs)
}

// Register adds `s4d ctl swap` to ctl (once), makes the daemon command
// an I/O flusher where it can serve swap (ublk.ExecAsFlusher, before its
// Action starts anything), and returns `s4d swap`: the one line main needs.
func Register(ctl, daemon *cli.Command) *cli.Command {
	for _, c := range ctl.Subcommands {
		if c == CtlCommand {
			return Command
		}
	}
	ctl.Subcommands = append(ctl.Subcommands, CtlCommand)
	before := daemon.Before
	daemon.Before = func(cx *cli.Context) error {
		if err := ublk.ExecAsFlusher(); err != nil {
			// Served anyway: the queue threads mark themselves.
			fmt.Fprintln(os.Stderr, "s4d: not an I/O flusher as a whole:", err)
		}
		if before != nil {
			return before(cx)
		}
		return nil
	}
	return Command
}
