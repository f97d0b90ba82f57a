package ctl

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/s4d-project/s4d/client"
	"github.com/s4d-project/s4d/ipc"
)

// storeTable is the store as a whole, one row, named as zramctl names its
// columns where they mean the same; CODEC is zramctl's ALGORITHM, named as
// the configuration and the clients name it (ALGORITHM still works).
var storeTable = &table[*ipc.Stats]{
	name:     "stats",
	aliases:  map[string]string{"ALGORITHM": "CODEC"},
	defaults: strings.Fields("CODEC DATA COMPR TOTAL RATIO PAGES ZERO-PAGES SAME-PAGES HUGE-PAGES MEM-LIMIT MEM-USED-MAX COMPACTED"),
	columns: []column[*ipc.Stats]{
		{"CODEC", "codec new pages are compressed with", text, func(s *ipc.Stats) any { return s.Codec }},
		{"DATA", "uncompressed size of the pages stored", size, func(s *ipc.Stats) any { return s.Mem.OrigDataSize }},
		{"COMPR", "compressed size of the pages stored", size, func(s *ipc.Stats) any { return s.Mem.ComprDataSize }},
		{"TOTAL", "memory held for them, index included", size, func(s *ipc.Stats) any { return s.Mem.MemUsedTotal }},
		{"RATIO", "DATA/COMPR", float, func(s *ipc.Stats) any { return ratioOf(s.Mem.OrigDataSize, s.Mem.ComprDataSize) }},
		{"PAGES", "pages stored", count, func(s *ipc.Stats) any { return s.Mem.Pages }},
		{"ZERO-PAGES", "pages that are all zero", count, func(s *ipc.Stats) any { return s.Mem.ZeroPages }},
		{"SAME-PAGES", "pages of one repeated 8-byte word", count, func(s *ipc.Stats) any { return s.Mem.SamePages }},
		{"HUGE-PAGES", "pages stored raw (incompressible)", count, func(s *ipc.Stats) any { return s.Mem.HugePages }},
		{"MEM-LIMIT", "memory limit, - for none", size, func(s *ipc.Stats) any { return nonZero(s.Mem.MemLimit) }},
		{"MEM-USED-MAX", "most memory ever held", size, func(s *ipc.Stats) any { return s.Mem.MemUsedMax }},
		{"COMPACTED", "pages moved by compaction", count, func(s *ipc.Stats) any { return s.Mem.PagesCompacted }},
		{"METADATA", "index memory", size, func(s *ipc.Stats) any { return s.Mem.MetadataBytes }},
		{"FAILED-READS", "GETs that failed", count, func(s *ipc.Stats) any { return s.IO.FailedReads }},
		{"FAILED-WRITES", "PUTs that failed", count, func(s *ipc.Stats) any { return s.IO.FailedWrites }},
		{"INVALID", "malformed or refused requests", count, func(s *ipc.Stats) any { return s.IO.InvalidIO }},
		{"NO-SPACE", "pages refused by the memory limit", count, func(s *ipc.Stats) any { return s.IO.NoSpace }},
		{"FALLBACKS", "batches redone on another engine", count, func(s *ipc.Stats) any { return s.IO.Fallbacks }},
		{"CHECKSUM-ERRORS", "stored pages that failed their checksum", count, func(s *ipc.Stats) any { return s.IO.ChecksumErrors }},
		{"RECOMPRESSED", "pages recompressed (s4d ctl recompress, recompress-every)", count, func(s *ipc.Stats) any { return recompressed(s).PagesKept }},
		{"RECOMPRESS-SAVED", "stored bytes recompression saved", size, func(s *ipc.Stats) any { return recompressed(s).BytesSaved }},
		{"BACKEND", "engine in use", text, func(s *ipc.Stats) any { return inUse(s) }},
		{"PAGE-SIZE", "page size in bytes", count, func(s *ipc.Stats) any { return uint64(s.PageSize) }},
		{"UPTIME", "seconds since the daemon started", float, func(s *ipc.Stats) any { return s.Uptime }},
		{"SERVER", "daemon version", text, func(s *ipc.Stats) any { return s.Server }},
	},
}

// backendTable is one row per engine, compression and decompression summed
// over codecs.
var backendTable = &table[ipc.BackendStats]{
	name:     "backends",
	defaults: strings.Fields("BACKEND STATE IN-USE PAGES-IN DATA COMPR PAGES-OUT ERRORS DETAIL"),
	columns: []column[ipc.BackendStats]{
		{"BACKEND", "engine", text, func(b ipc.BackendStats) any { return b.Name }},
		{"STATE", "ok, unavailable or failed", text, func(b ipc.BackendStats) any { return b.State }},
		{"IN-USE", "* for the engine in use", text, func(b ipc.BackendStats) any { return map[bool]string{true: "*"}[b.InUse] }},
		{"PAGES-IN", "pages compressed", count, func(b ipc.BackendStats) any { return sum(b, "compress", pagesOf) }},
		{"DATA", "bytes compressed", size, func(b ipc.BackendStats) any { return sum(b, "compress", inOf) }},
		{"COMPR", "bytes they became", size, func(b ipc.BackendStats) any { return sum(b, "compress", outOf) }},
		{"PAGES-OUT", "pages decompressed", count, func(b ipc.BackendStats) any { return sum(b, "decompress", pagesOf) }},
		{"BATCHES", "batches, both directions", count, func(b ipc.BackendStats) any { return sum(b, "", batchesOf) }},
		{"ERRORS", "failed batches, both directions", count, func(b ipc.BackendStats) any { return sum(b, "", errorsOf) }},
		{"DETAIL", "why it is unavailable, or what it is", text, func(b ipc.BackendStats) any { return detail(b) }},
		// An engine of several GPUs has a row per device (cuda0, cuda1...).
		{"ENGINE", "the engine a device belongs to", text, func(b ipc.BackendStats) any { return cmp.Or(b.Engine, b.Name) }},
		{"DEVICE", "the device's number, for an engine of several", text, func(b ipc.BackendStats) any { return b.Device }},
		{"IN-FLIGHT", "batches being worked on now", count, func(b ipc.BackendStats) any { return uint64(b.InFlight) }},
	},
}

var poolTable = &table[ipc.PoolStats]{
	name:     "pools",
	defaults: strings.Fields("POOL UID PAGES DATA COMPR RATIO ZERO SAME HUGE"),
	columns: []column[ipc.PoolStats]{
		{"POOL", "pool name", text, func(p ipc.PoolStats) any { return p.Name }},
		{"UID", "owner's user id", count, func(p ipc.PoolStats) any { return uint64(p.UID) }},
		{"PAGES", "pages stored", count, func(p ipc.PoolStats) any { return p.Pages }},
		{"DATA", "uncompressed size", size, func(p ipc.PoolStats) any { return p.OrigBytes }},
		{"COMPR", "compressed size", size, func(p ipc.PoolStats) any { return p.StoredBytes }},
		{"RATIO", "DATA/COMPR", float, func(p ipc.PoolStats) any { return ratioOf(p.OrigBytes, p.StoredBytes) }},
		{"ZERO", "zero pages", count, func(p ipc.PoolStats) any { return p.ZeroPages }},
		{"SAME", "same-filled pages", count, func(p ipc.PoolStats) any { return p.SamePages }},
		{"HUGE", "pages stored raw", count, func(p ipc.PoolStats) any { return p.HugePages }},
		{"CODEC", "the pool's own codec for new pages (s4d ctl codec), - for the daemon's", text, func(p ipc.PoolStats) any { return p.Codec }},
	},
}

// regionTable is one row per region (s4d run, Client.Map).
var regionTable = &table[ipc.RegionStats]{
	name:     "regions",
	defaults: strings.Fields("REGION UID PID SIZE BUDGET RESIDENT EVICTED COMPR RATIO FAULTS FAULT-P50-US FAULT-P99-US"),
	columns: []column[ipc.RegionStats]{
		{"REGION", "region id", count, func(r ipc.RegionStats) any { return r.ID }},
		{"UID", "owner's user id", count, func(r ipc.RegionStats) any { return uint64(r.UID) }},
		{"PID", "the client's process", count, func(r ipc.RegionStats) any { return uint64(r.PID) }},
		{"SIZE", "bytes of the region", size, func(r ipc.RegionStats) any { return r.Size }},
		{"BUDGET", "bytes that may stay resident", size, func(r ipc.RegionStats) any { return r.Budget }},
		{"RESIDENT", "bytes in the client's memory", size, func(r ipc.RegionStats) any { return r.Resident }},
		{"EVICTED", "bytes kept compressed", size, func(r ipc.RegionStats) any { return r.Evicted }},
		{"COMPR", "their compressed size", size, func(r ipc.RegionStats) any { return r.Stored }},
		{"RATIO", "EVICTED/COMPR", float, func(r ipc.RegionStats) any { return r.Ratio }},
		{"FAULTS", "pages brought back", count, func(r ipc.RegionStats) any { return r.Faults }},
		{"ZERO-FILLS", "first touches", count, func(r ipc.RegionStats) any { return r.ZeroFills }},
		{"EVICTIONS", "pages evicted", count, func(r ipc.RegionStats) any { return r.Evictions }},
		{"FAULT-P50-US", "median time to serve a fault", float, func(r ipc.RegionStats) any { return r.FaultP50 }},
		{"FAULT-P99-US", "99th percentile time to serve a fault", float, func(r ipc.RegionStats) any { return r.FaultP99 }},
		{"ERROR", "why the region stopped serving", text, func(r ipc.RegionStats) any { return oneLine(r.Error) }},
	},
}

func nonZero(n uint64) any {
	if n == 0 {
		return nil
	}
	return n
}

func inUse(s *ipc.Stats) string {
	for _, b := range s.Backends {
		if b.InUse {
			return b.Name
		}
	}
	return ""
}

func pagesOf(c ipc.CodecCounters) uint64   { return c.Pages }
func inOf(c ipc.CodecCounters) uint64      { return c.BytesIn }
func outOf(c ipc.CodecCounters) uint64     { return c.BytesOut }
func batchesOf(c ipc.CodecCounters) uint64 { return c.Batches }
func errorsOf(c ipc.CodecCounters) uint64  { return c.Errors }

// sum adds one counter over codecs, for one direction or ("") both.
func sum(b ipc.BackendStats, dir string, f func(ipc.CodecCounters) uint64) uint64 {
	var n uint64
	for _, c := range b.Counters {
		if dir == "" || c.Direction == dir {
			n += f(c)
		}
	}
	return n
}

func detail(b ipc.BackendStats) string {
	if b.Reason != "" {
		return oneLine(b.Reason)
	}
	return oneLine(b.Describe)
}

var statsCommand = &cli.Command{
	Name:  "stats",
	Usage: "show the store's size, ratio, backends and pools",
	Description: "Without --output: the store, its engines, its error counters, your pools and your regions (all for root).\n" +
		"With --output: the store's one row, with the columns named. --json alone prints the daemon's whole answer.\n" +
		"Columns:" + storeTable.help(),
	UsageText: "s4d ctl stats [--pool P] [--output COLS] [--noheadings] [--raw] [--bytes] [--json]",
	Flags: withSocket(append(listFlags("the stats", "Columns are listed under DESCRIPTION."),
		&cli.StringFlag{Name: "pool", Usage: "only this pool"})...),
	Action: func(cx *cli.Context) error {
		o := optsOf(cx)
		if _, err := storeTable.pick(o.output); err != nil {
			return err // before asking the daemon anything
		}
		ctx, cancel := timeout(cx)
		defer cancel()
		c := dial(cx)
		defer c.Close()
		st, err := c.Stats(ctx, cx.String("pool"))
		if err != nil {
			return err
		}
		if o.json && o.output == "" {
			enc := json.NewEncoder(os.Stdout)
			enc.SetIndent("", "  ")
			return enc.Encode(st)
		}
		if o.output != "" {
			return storeTable.print(os.Stdout, []*ipc.Stats{st}, o)
		}
		return printStats(os.Stdout, st, o)
	},
}

// printStats is the full report: store, engines, error counters, pools.
func printStats(w io.Writer, st *ipc.Stats, o listOpts) error {
	if err := storeTable.print(w, []*ipc.Stats{st}, o); err != nil {
		return err
	}
	fmt.Fprintln(w)
	if err := backendTable.print(w, st.Backends, o); err != nil {
		return err
	}
	io := st.IO
	fmt.Fprintf(w, "\nfailed reads %d, failed writes %d, invalid requests %d, refused for space %d, fallbacks %d, checksum errors %d\n",
		io.FailedReads, io.FailedWrites, io.InvalidIO, io.NoSpace, io.Fallbacks, io.ChecksumErrors)
	fmt.Fprintf(w, "connections refused %d, requests busy %d, request memory %s of %s (most %s)\n",
		io.RefusedConnections, io.Busy, human(uint64(io.RequestBytes)), human(uint64(io.RequestBudget)), human(uint64(io.RequestBytesMax)))
	if r := st.Recompress; r != nil && r.Runs > 0 {
		printRecompress(w, "cold pages: ", r) // idle.go
	}
	if st.Backing != nil {
		fmt.Fprintln(w)
		if err := backingTable.print(w, []*ipc.BackingStats{st.Backing}, o); err != nil { // writeback.go
			return err
		}
	}
	if st.Remote != nil {
		printRemote(w, st.Remote) // pool.go
	}
	if len(st.Regions) > 0 {
		fmt.Fprintln(w)
		if err := regionTable.print(w, st.Regions, o); err != nil {
			return err
		}
	}
	if len(st.Pools) > 0 {
		fmt.Fprintln(w)
		return poolTable.print(w, st.Pools, o)
	}
	return nil
}

func oneLine(s string) string { return strings.ReplaceAll(s, "\n", " ") }

var poolsCommand = &cli.Command{
	Name:        "pools",
	Usage:       "list your pools (all pools for root)",
	UsageText:   "s4d ctl pools [--output COLS] [--noheadings] [--raw] [--bytes] [--json]",
	Description: "Columns:" + poolTable.help(),
	Flags:       withSocket(listFlags("the pools", "Columns are listed under DESCRIPTION.")...),
	Action: func(cx *cli.Context) error {
		o := optsOf(cx)
		if _, err := poolTable.pick(o.output); err != nil {
			return err
		}
		return withClient(func(ctx context.Context, c *client.Client) error {
			pools, err := c.Pools(ctx)
			if err != nil {
				return err
			}
			return poolTable.print(os.Stdout, pools, o)
		})(cx)
	},
}

var compactCommand = &cli.Command{
	Name:  "compact",
	Usage: "move pages out of sparse arenas and return the memory",
	Flags: withSocket(),
	Action: withClient(func(ctx context.Context, c *client.Client) error {
		r, err := c.Compact(ctx)
		if err != nil {
			return err
		}
		fmt.Printf("moved %d pages, freed %s\n", r.PagesMoved, human(r.BytesFreed))
		return nil
	}),
}
