package ctl

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/s4d-project/s4d/client"
	"github.com/s4d-project/s4d/cmd/s4d/exitcode"
	"github.com/s4d-project/s4d/ipc"
)

// The cold tier's commands: idle pages (zram's idle marking and ages) and
// recompression of idle and huge pages.

var idleTable = &table[ipc.IdlePool]{
	name:     "pools",
	defaults: strings.Fields("POOL UID PAGES IDLE IDLE-STORED"),
	columns: []column[ipc.IdlePool]{
		{"POOL", "pool name", text, func(p ipc.IdlePool) any { return p.Name }},
		{"UID", "owner's user id", count, func(p ipc.IdlePool) any { return uint64(p.UID) }},
		{"PAGES", "pages stored", count, func(p ipc.IdlePool) any { return p.Pages }},
		{"IDLE", "pages untouched for at least --age", count, func(p ipc.IdlePool) any { return p.IdlePages }},
		{"IDLE-STORED", "the stored bytes of those pages", size, func(p ipc.IdlePool) any { return p.IdleBytes }},
	},
}

var idlePageTable = &table[ipc.IdlePage]{
	name:     "pages",
	defaults: strings.Fields("POOL KEY AGE CLASS STORED"),
	columns: []column[ipc.IdlePage]{
		{"POOL", "pool name", text, func(p ipc.IdlePage) any { return p.Pool }},
		{"KEY", "key", count, func(p ipc.IdlePage) any { return p.Key }},
		{"AGE", "idle epochs since last read or written (63: that long or more, or marked idle)", count, func(p ipc.IdlePage) any { return uint64(p.AgeEpochs) }},
		{"CLASS", "how the page is stored", text, func(p ipc.IdlePage) any { return p.Class }},
		{"STORED", "stored bytes", size, func(p ipc.IdlePage) any { return uint64(p.Size) }},
	},
}

var idleCommand = &cli.Command{
	Name:  "idle",
	Usage: "count, list or mark idle pages",
	Description: "Every page knows how many idle epochs (idle-epoch, 1m by default) went by since it was last read\n" +
		"or written. Without flags, counts per pool the pages untouched for at least --age. --mark first\n" +
		"marks every page idle, as if untouched for the longest (zram's `echo all > idle`): pages read or\n" +
		"written afterwards are young again, and `s4d ctl recompress --idle 0` takes the rest.\n" +
		"Columns:" + idleTable.help() + "\nWith --list:" + idlePageTable.help(),
	UsageText: "s4d ctl idle [--pool P] [--age AGE] [--mark] [--list N] [--output COLS] [--noheadings] [--raw] [--bytes] [--json]",
	Flags: withSocket(append(listFlags("the counts", "Columns are listed under DESCRIPTION."),
		&cli.StringFlag{Name: "pool", Usage: "only this pool (default: all of yours; every pool for root)"},
		&cli.DurationFlag{Name: "age", Usage: "pages untouched for at least this long are idle (0: count marked pages and every other)"},
		&cli.BoolFlag{Name: "mark", Usage: "mark every page idle first"},
		&cli.UintFlag{Name: "list", Usage: "list up to this many idle pages, the oldest first, instead of the counts"})...),
	Action: func(cx *cli.Context) error {
		o := optsOf(cx)
		if cx.Duration("age") < 0 {
			return exitcode.UsageErr(fmt.Errorf("--age %v: cannot be negative", cx.Duration("age")))
		}
		list := cx.Uint("list")
		if list > 0 {
			if _, err := idlePageTable.pick(o.output); err != nil {
				return err
			}
		} else if _, err := idleTable.pick(o.output); err != nil {
			return err
		}
		req := &ipc.IdleRequest{Pool: cx.String("pool"), MinAge: cx.Duration("age"), List: uint32(min(list, 1<<31))}
		if cx.Bool("mark") {
			req.Flags |= ipc.IdleMark
		}
		return withClient(func(ctx context.Context, c *client.Client) error {
			r, err := c.Idle(ctx, req)
			if err != nil {
				return err
			}
			if cx.Bool("mark") && !o.json {
				fmt.Printf("marked %d pages idle\n", r.Marked)
			}
			if list > 0 {
				return idlePageTable.print(os.Stdout, r.Pages, o)
			}
			return idleTable.print(os.Stdout, r.Pools, o)
		})(cx)
	},
}

var recompressCommand = &cli.Command{
	Name:  "recompress",
	Usage: "recompress idle or huge pages with zstd at a strong level now",
	Description: "Recompresses the pages chosen (--idle AGE: untouched for that long; --huge: stored raw; both: either)\n" +
		"with zstd at a strong level, on the engine the daemon finds fastest for it, and keeps each page's new\n" +
		"form when it saves recompress-min-saving percent (10 by default). Pages tried are not tried again until\n" +
		"written. Requests are served meanwhile, first; this command waits for the end (raise --timeout for a\n" +
		"large store). recompress-every in the configuration runs it in the background.",
	UsageText: "s4d ctl recompress [--idle AGE] [--huge] [--pool P] [--json]",
	Flags: withSocket(
		&cli.DurationFlag{Name: "idle", Usage: "pages untouched for at least this long (0: every page, and those marked idle)"},
		&cli.BoolFlag{Name: "huge", Usage: "pages stored raw (incompressible at the foreground's level)"},
		&cli.StringFlag{Name: "pool", Usage: "only this pool (default: all of yours; every pool for root)"},
		&cli.BoolFlag{Name: "json", Usage: "print the result as JSON"}),
	Action: func(cx *cli.Context) error {
		req := &ipc.RecompressRequest{Pool: cx.String("pool"), MinAge: cx.Duration("idle")}
		if cx.IsSet("idle") {
			if req.MinAge < 0 {
				return exitcode.UsageErr(fmt.Errorf("--idle %v: cannot be negative", req.MinAge))
			}
			req.Flags |= ipc.RecompressIdle
		}
		if cx.Bool("huge") {
			req.Flags |= ipc.RecompressHuge
		}
		if req.Flags == 0 {
			return exitcode.UsageErr(fmt.Errorf("say which pages: --idle AGE, --huge, or both"))
		}
		return withClient(func(ctx context.Context, c *client.Client) error {
			r, err := c.Recompress(ctx, req)
			if err != nil {
				return err
			}
			if cx.Bool("json") {
				enc := json.NewEncoder(os.Stdout)
				enc.SetIndent("", "  ")
				return enc.Encode(r)
			}
			printRecompress(os.Stdout, "", r)
			return nil
		})(cx)
	},
}

// printRecompress says what recompression did, in one line.
func printRecompress(w io.Writer, prefix string, r *ipc.RecompressResult) {
	took := time.Duration(r.Seconds * float64(time.Second)).Round(time.Millisecond)
	fmt.Fprintf(w, "%srecompressed %d of %d pages tried, %s saved of %s, in %v", prefix,
		r.PagesKept, r.PagesTried, human(r.BytesSaved), human(r.BytesBefore), took)
	if r.Seconds > 0 && r.BytesIn > 0 {
		fmt.Fprintf(w, " (%.2f GB/s of pages)", float64(r.BytesIn)/r.Seconds/1e9)
	}
	if r.Backend != "" {
		fmt.Fprintf(w, " on %s", r.Backend)
	}
	if r.PagesChanged > 0 {
		fmt.Fprintf(w, "; %d pages written or deleted meanwhile were left as written", r.PagesChanged)
	}
	fmt.Fprintln(w)
}

// recompressed is STATS's recompression totals, zero from a daemon that
// has none to report.
func recompressed(s *ipc.Stats) *ipc.RecompressStats {
	if s.Recompress == nil {
		return &ipc.RecompressStats{}
	}
	return s.Recompress
}
