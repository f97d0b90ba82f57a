package ctl

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/urfave/cli/v2"

	"github.com/s4d-project/s4d/ipc"
)

var statsCommand = &cli.Command{
	Name:      "stats",
	Usage:     "show the store's size, ratio, backends and pools",
	UsageText: "s4d ctl stats [--json] [--pool P]",
	Flags: withSocket(&cli.BoolFlag{Name: "json", Usage: "print the daemon's JSON"},
		&cli.StringFlag{Name: "pool", Usage: "only this pool"}),
	Action: func(cx *cli.Context) error {
		ctx, cancel := timeout(cx)
		defer cancel()
		c := client(cx)
		defer c.Close()
		st, err := c.Stats(ctx, cx.String("pool"))
		if err != nil {
			return err
		}
		if cx.Bool("json") {
			enc := json.NewEncoder(os.Stdout)
			enc.SetIndent("", "  ")
			return enc.Encode(st)
		}
		printStats(st)
		return nil
	},
}

func ratio(orig, compr uint64) string {
	if compr == 0 {
		if orig == 0 {
			return "-"
		}
		return "inf"
	}
	return fmt.Sprintf("%.2f", float64(orig)/float64(compr))
}

func printStats(st *ipc.Stats) {
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	m := st.Mem
	limit := "-"
	if m.MemLimit > 0 {
		limit = human(m.MemLimit)
	}
	fmt.Fprintln(w, "ALGORITHM\tDATA\tCOMPR\tTOTAL\tRATIO\tPAGES\tZERO-PAGES\tSAME-PAGES\tHUGE-PAGES\tMEM-LIMIT\tMEM-USED-MAX\tCOMPACTED")
	fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%d\t%d\t%d\t%d\t%s\t%s\t%d\n", st.Codec, human(m.OrigDataSize),
		human(m.ComprDataSize), human(m.MemUsedTotal), ratio(m.OrigDataSize, m.ComprDataSize), m.Pages,
		m.ZeroPages, m.SamePages, m.HugePages, limit, human(m.MemUsedMax), m.PagesCompacted)
	w.Flush()
	fmt.Println()
	fmt.Fprintln(w, "BACKEND\tSTATE\tIN-USE\tPAGES-IN\tDATA\tCOMPR\tPAGES-OUT\tERRORS\tDETAIL")
	for _, b := range st.Backends {
		var cpages, in, out, dpages, errs uint64
		for _, c := range b.Counters {
			if c.Direction == "compress" {
				cpages, in, out = cpages+c.Pages, in+c.BytesIn, out+c.BytesOut
			} else {
				dpages += c.Pages
			}
			errs += c.Errors
		}
		detail := b.Describe
		if b.Reason != "" {
			detail = b.Reason
		}
		use := ""
		if b.InUse {
			use = "*"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%s\t%s\t%d\t%d\t%s\n", b.Name, b.State, use, cpages, human(in), human(out), dpages, errs, oneLine(detail))
	}
	w.Flush()
	io := st.IO
	fmt.Printf("\nfailed reads %d, failed writes %d, invalid requests %d, refused for space %d, fallbacks %d, checksum errors %d\n",
		io.FailedReads, io.FailedWrites, io.InvalidIO, io.NoSpace, io.Fallbacks, io.ChecksumErrors)
	if len(st.Pools) > 0 {
		fmt.Println()
		printPools(w, st.Pools)
	}
}

func printPools(w *tabwriter.Writer, pools []ipc.PoolStats) {
	fmt.Fprintln(w, "POOL\tUID\tPAGES\tDATA\tCOMPR\tRATIO\tZERO\tSAME\tHUGE")
	for _, p := range pools {
		fmt.Fprintf(w, "%s\t%d\t%d\t%s\t%s\t%s\t%d\t%d\t%d\n", p.Name, p.UID, p.Pages, human(p.OrigBytes),
			human(p.StoredBytes), ratio(p.OrigBytes, p.StoredBytes), p.ZeroPages, p.SamePages, p.HugePages)
	}
	w.Flush()
}

func oneLine(s string) string { return strings.ReplaceAll(s, "\n", " ") }

var poolsCommand = &cli.Command{
	Name:  "pools",
	Usage: "list your pools (all pools for root)",
	Flags: withSocket(),
	Action: withClient(func(ctx context.Context, c *ipc.Client) error {
		pools, err := c.Pools(ctx)
		if err != nil {
			return err
		}
		printPools(tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0), pools)
		return nil
	}),
}

var compactCommand = &cli.Command{
	Name:  "compact",
	Usage: "move pages out of sparse arenas and return the memory",
	Flags: withSocket(),
	Action: withClient(func(ctx context.Context, c *ipc.Client) error {
		r, err := c.Compact(ctx)
		if err != nil {
			return err
		}
		fmt.Printf("moved %d pages, freed %s\n", r.PagesMoved, human(r.BytesFreed))
		return nil
	}),
}
