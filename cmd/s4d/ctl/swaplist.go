package ctl

import (
	"io"
	"strconv"

	"github.com/urfave/cli/v2"

	"github.com/s4d-project/s4d/ipc"
)

// The listing of `s4d ctl swap` (package swapcmd): zramctl's default
// columns, and the same --output, --noheadings, --raw and --bytes as the
// other listings (issue 42). Its --json stays the daemon's whole
// description of each device, which scripts read.

type swapRow struct {
	d    ipc.SwapDevice
	swap bool // in /proc/swaps
}

var swapTable = &table[swapRow]{
	name: "swap",
	columns: []column[swapRow]{
		{"NAME", "the block device", text, func(r swapRow) any { return r.d.Name }},
		{"DISKSIZE", "the device's size", size, func(r swapRow) any { return r.d.DiskSize }},
		{"DATA", "bytes of the pages stored, uncompressed", size, func(r swapRow) any { return r.d.Data }},
		{"COMPR", "their compressed bytes", size, func(r swapRow) any { return r.d.Compr }},
		{"TOTAL", "compressed bytes plus the device's I/O buffers", size, func(r swapRow) any { return r.d.Total }},
		{"STREAMS", "queues, each served by its own thread", count, func(r swapRow) any { return uint64(r.d.Streams) }},
		{"MOUNTPOINT", "[SWAP] when the device is swap (/proc/swaps)", text, func(r swapRow) any {
			if r.swap {
				return "[SWAP]"
			}
			return ""
		}},
		{"RATIO", "DATA/COMPR", float, func(r swapRow) any { return ratioOf(r.d.Data, r.d.Compr) }},
		{"PAGES", "pages stored", count, func(r swapRow) any { return r.d.Pages }},
		{"ZERO-PAGES", "pages stored as zero or same-filled", count, func(r swapRow) any { return r.d.Zero }},
		{"HUGE-PAGES", "pages stored raw", count, func(r swapRow) any { return r.d.Huge }},
		{"DEPTH", "requests in flight per queue", count, func(r swapRow) any { return uint64(r.d.Depth) }},
		{"PRIORITY", "swap priority s4d swap on gives it (-1: none, then 100)", text, func(r swapRow) any { return itoa(r.d.Priority) }},
		{"POOL", "the pool holding its pages", text, func(r swapRow) any { return r.d.Pool }},
		{"ERRORS", "store calls that failed", count, func(r swapRow) any { return r.d.Errors }},
		{"LOST", "reads failed since a crash lost their pages", count, func(r swapRow) any { return r.d.Lost }},
		{"FRESH", "created empty by this daemon (only then does s4d swap on run mkswap)", text, func(r swapRow) any { return yesNo(r.d.Fresh) }},
		{"KEPT", "left in place across the daemon's stops (persist)", text, func(r swapRow) any { return yesNo(r.d.Kept) }},
		{"MEM-LIMIT", "compressed bytes kept in RAM, the coldest pages past it written back (0: none)", size, func(r swapRow) any { return r.d.MemLimit }},
		{"BD-COUNT", "pages written back, on the file or device now", count, func(r swapRow) any { return r.d.BdCount }},
		{"BD-READS", "pages read back from there", count, func(r swapRow) any { return r.d.BdReads }},
		{"BD-WRITES", "pages written there", count, func(r swapRow) any { return r.d.BdWrites }},
	},
	defaults: []string{"NAME", "DISKSIZE", "DATA", "COMPR", "TOTAL", "STREAMS", "MOUNTPOINT"},
}

// SwapColumns is the --output help of `s4d ctl swap`, for its Description.
func SwapColumns() string { return "Columns:" + swapTable.help() }

// SwapListFlags are --output, --noheadings, --raw and --bytes.
func SwapListFlags() []cli.Flag {
	return listFlags("", "Columns are listed under DESCRIPTION.")[:4]
}

// PrintSwap prints devs as the flags of cx ask; active says which are
// swap. Nothing is printed when there is no device, as zramctl does.
func PrintSwap(cx *cli.Context, w io.Writer, devs []ipc.SwapDevice, active map[string]bool) error {
	if len(devs) == 0 {
		_, err := swapTable.pick(cx.String("output")) // a bad --output is still refused
		return err
	}
	rows := make([]swapRow, len(devs))
	for i, d := range devs {
		rows[i] = swapRow{d, active[d.Name]}
	}
	return swapTable.print(w, rows, optsOf(cx))
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func itoa(n int) string {
	if n < 0 {
		return "-"
	}
	return strconv.Itoa(n)
}
