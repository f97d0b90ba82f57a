package ctl

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/urfave/cli/v2"
	"golang.org/x/term"

	"github.com/s4d-project/s4d/client"
	"github.com/s4d-project/s4d/cmd/s4d/exitcode"
	"github.com/s4d-project/s4d/ipc"
)

// rateRow is the store, or one engine, between two samples of STATS.
type rateRow struct {
	name   string
	at     time.Time
	cur    *ipc.Stats
	engine *ipc.BackendStats // nil for the whole store
	// Per second since the previous sample.
	inPages, inBytes, outPages, outBytes, errors float64
}

var watchTable = &table[rateRow]{
	name:     "watch",
	defaults: strings.Fields("TIME PAGES DATA COMPR RATIO MEM-USED IN-PAGES/S IN/S OUT-PAGES/S OUT/S ERRORS/S"),
	columns: []column[rateRow]{
		{"TIME", "when the sample was taken", text, func(r rateRow) any { return r.at.Format("15:04:05") }},
		{"ENGINE", "the engine, or all for the store", text, func(r rateRow) any { return r.name }},
		{"PAGES", "pages stored", count, func(r rateRow) any { return r.store(func(m ipc.MemStats) uint64 { return m.Pages }) }},
		{"DATA", "uncompressed size of the pages stored", size, func(r rateRow) any { return r.store(func(m ipc.MemStats) uint64 { return m.OrigDataSize }) }},
		{"COMPR", "compressed size of the pages stored", size, func(r rateRow) any { return r.store(func(m ipc.MemStats) uint64 { return m.ComprDataSize }) }},
		{"RATIO", "DATA/COMPR", float, func(r rateRow) any {
			if r.engine != nil {
				return nil
			}
			return ratioOf(r.cur.Mem.OrigDataSize, r.cur.Mem.ComprDataSize)
		}},
		{"MEM-USED", "memory held for the pages", size, func(r rateRow) any { return r.store(func(m ipc.MemStats) uint64 { return m.MemUsedTotal }) }},
		{"MEM-LIMIT", "memory limit, - for none", size, func(r rateRow) any { return r.store(func(m ipc.MemStats) uint64 { return m.MemLimit }) }},
		{"IN-PAGES/S", "pages compressed per second", float, func(r rateRow) any { return r.inPages }},
		{"IN/S", "bytes compressed per second", size, func(r rateRow) any { return uint64(r.inBytes) }},
		{"OUT-PAGES/S", "pages decompressed per second", float, func(r rateRow) any { return r.outPages }},
		{"OUT/S", "bytes decompressed per second", size, func(r rateRow) any { return uint64(r.outBytes) }},
		{"ERRORS/S", "failed requests and batches per second", float, func(r rateRow) any { return r.errors }},
	},
}

// store reads a store-wide figure; engines rows leave it empty.
func (r rateRow) store(f func(ipc.MemStats) uint64) any {
	if r.engine != nil {
		return nil
	}
	return nonZero(f(r.cur.Mem))
}

// rates computes the store's row and one row per engine that did any work,
// from two samples; seconds come from the daemon's uptime, so the time a
// request spent in flight does not skew them.
func rates(prev, cur *ipc.Stats, at time.Time) []rateRow {
	dt := cur.Uptime - prev.Uptime
	if dt <= 0 {
		dt = 1e-9
	}
	per := func(a, b uint64) float64 {
		if b < a { // a restarted daemon
			return 0
		}
		return float64(b-a) / dt
	}
	before := map[string]ipc.BackendStats{}
	for _, b := range prev.Backends {
		before[b.Name] = b
	}
	all := rateRow{name: "all", at: at, cur: cur}
	var engines []rateRow
	for i := range cur.Backends {
		b, p := cur.Backends[i], before[cur.Backends[i].Name]
		r := rateRow{name: b.Name, at: at, cur: cur, engine: &cur.Backends[i],
			inPages:  per(sum(p, "compress", pagesOf), sum(b, "compress", pagesOf)),
			inBytes:  per(sum(p, "compress", inOf), sum(b, "compress", inOf)),
			outPages: per(sum(p, "decompress", pagesOf), sum(b, "decompress", pagesOf)),
			outBytes: per(sum(p, "decompress", outOf), sum(b, "decompress", outOf)),
			errors:   per(sum(p, "", errorsOf), sum(b, "", errorsOf))}
		all.inPages, all.inBytes = all.inPages+r.inPages, all.inBytes+r.inBytes
		all.outPages, all.outBytes = all.outPages+r.outPages, all.outBytes+r.outBytes
		all.errors += r.errors
		if b.InUse || sum(b, "", batchesOf) > 0 {
			engines = append(engines, r)
		}
	}
	io0, io1 := prev.IO, cur.IO
	all.errors += per(io0.FailedReads+io0.FailedWrites+io0.ChecksumErrors, io1.FailedReads+io1.FailedWrites+io1.ChecksumErrors)
	return append([]rateRow{all}, engines...)
}

var watchCommand = &cli.Command{
	Name:  "watch",
	Usage: "show rates per second: pages and bytes in and out, memory, errors",
	Description: "On a terminal the screen is redrawn in place every interval, the store and each busy engine\n" +
		"on its own line; otherwise one line per interval is printed (like vmstat), for logs and scripts.\n" +
		"Columns:" + watchTable.help(),
	UsageText: "s4d ctl watch [--interval 1s] [--count N] [--output COLS] [--noheadings] [--raw] [--bytes] [--json]",
	Flags: withSocket(append(listFlags("one object per interval", "Columns are listed under DESCRIPTION."),
		&cli.DurationFlag{Name: "interval", Aliases: []string{"i"}, Value: time.Second, Usage: "time between samples"},
		&cli.IntFlag{Name: "count", Aliases: []string{"c"}, Usage: "stop after this many updates; 0 = until interrupted"})...),
	Action: func(cx *cli.Context) error {
		o := optsOf(cx)
		if _, err := watchTable.pick(o.output); err != nil {
			return err
		}
		every := cx.Duration("interval")
		if every <= 0 {
			return exitcode.UsageErr(fmt.Errorf("--interval %v: must be positive", every))
		}
		c := dial(cx)
		defer c.Close()
		return watch(cx.Context, c, os.Stdout, term.IsTerminal(int(os.Stdout.Fd())) && !o.json && !o.raw, every, cx.Int("count"), o)
	},
}

// watch samples STATS every interval and prints rates until count updates
// were printed (0: until ctx ends).
func watch(ctx context.Context, c *client.Client, w io.Writer, tty bool, every time.Duration, count int, o listOpts) error {
	sample := func() (*ipc.Stats, error) {
		rctx, cancel := context.WithTimeout(ctx, every+10*time.Second)
		defer cancel()
		return c.Stats(rctx, "")
	}
	prev, err := sample()
	if err != nil {
		return err
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	for n := 0; count == 0 || n < count; n++ {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		cur, err := sample()
		if err != nil {
			return err
		}
		rows := rates(prev, cur, time.Now())
		prev = cur
		lo := o
		switch {
		case tty:
			// Home, clear, redraw: the view stays where it is, as watch(1) does.
			fmt.Fprintf(w, "\x1b[H\x1b[2J%s: every %v, %s\n\n", cur.Server, every, rows[0].at.Format(time.TimeOnly))
			if o.output == "" {
				lo.output = "ENGINE" + strings.TrimPrefix(strings.Join(watchTable.defaults, ","), "TIME")
			}
		default:
			// One line per interval, the heading once.
			rows = rows[:1]
			lo.noheadings, lo.stream = o.noheadings || n > 0, true
		}
		if err := watchTable.print(w, rows, lo); err != nil {
			return err
		}
	}
	return nil
}
