package ctl

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/s4d-project/s4d/client"
	"github.com/s4d-project/s4d/cmd/s4d/exitcode"
	"github.com/s4d-project/s4d/ipc"
)

// poolFlag refuses a name the daemon would refuse, before connecting, as
// the usage error it is.
var poolFlag = &cli.StringFlag{Name: "pool", Required: true, Usage: "pool name",
	Action: func(_ *cli.Context, name string) error {
		if !ipc.ValidPool(name) {
			return exitcode.UsageErr(fmt.Errorf("--pool %q: a pool name is 1-%d printable characters, no spaces", name, ipc.MaxPoolName))
		}
		return nil
	}}
var keysFlag = &cli.StringFlag{Name: "keys", Required: true, Usage: "key or inclusive range K-L"}

var putCommand = &cli.Command{
	Name:      "put",
	Usage:     "store a file's pages under consecutive keys",
	UsageText: "s4d ctl put --pool P --file F [--first-key K]",
	Flags: withSocket(poolFlag,
		&cli.StringFlag{Name: "file", Required: true, Usage: "file whose size is a multiple of the page size ('-' for stdin)"},
		&cli.Uint64Flag{Name: "first-key", Usage: "key of the file's first page"}),
	Action: func(cx *cli.Context) error {
		ctx, cancel := timeout(cx)
		defer cancel()
		name, pool, first := cx.String("file"), cx.String("pool"), cx.Uint64("first-key")
		f := os.Stdin
		if name != "-" {
			var err error
			if f, err = os.Open(name); err != nil {
				return err
			}
			defer f.Close()
		}
		c := dial(cx)
		defer c.Close()
		h, err := c.Hello(ctx)
		if err != nil {
			return err
		}
		ps := int(h.PageSize)
		notPages := func(size int64) error {
			return exitcode.UsageErr(fmt.Errorf("%s is %d bytes: not a whole number of %d-byte pages", name, size, ps))
		}
		pastLast := func(pages uint64) bool { return first+pages-1 < first }
		keysLeft := exitcode.UsageErr(fmt.Errorf("--first-key %d: the file's pages would run past the largest key", first))
		// A regular file is checked whole before any page is stored; a
		// pipe can only be checked as it goes.
		if fi, err := f.Stat(); err == nil && fi.Mode().IsRegular() {
			if fi.Size() == 0 || fi.Size()%int64(ps) != 0 {
				return notPages(fi.Size())
			}
			if pastLast(uint64(fi.Size() / int64(ps))) {
				return keysLeft
			}
		}
		// One request's pages at a time: the file is never held whole.
		per := perBatch(h)
		buf := make([]byte, per*ps)
		keys := make([]uint64, 0, per)
		var t tally
		var size int64
		for {
			n, err := readPages(f, buf)
			if err == io.EOF {
				break
			}
			if err != nil {
				return err
			}
			size += int64(n)
			if n%ps != 0 {
				return notPages(size)
			}
			if pastLast(uint64(t.n + n/ps)) {
				return keysLeft
			}
			keys = keyRange{first, t.n + n/ps}.keys(keys, t.n, t.n+n/ps)
			codes, err := c.Put(ctx, pool, keys, buf[:n])
			if err != nil {
				return err
			}
			t.add(keys, codes)
		}
		if t.n == 0 {
			return notPages(0)
		}
		if err := t.err("put", pool); err != nil {
			return err
		}
		fmt.Printf("stored %d pages in pool %s, keys %d-%d\n", t.n, pool, first, first+uint64(t.n-1))
		return nil
	},
}

var getCommand = &cli.Command{
	Name:  "get",
	Usage: "fetch pages into a file",
	Description: "Pages are written as they arrive. A key not in the pool leaves a hole in the file (zeros),\n" +
		"and the command exits 3 saying how many were missing.",
	UsageText: "s4d ctl get --pool P --keys K-L --out F",
	Flags:     withSocket(poolFlag, keysFlag, &cli.StringFlag{Name: "out", Required: true, Usage: "file to write ('-' for stdout)"}),
	Action: func(cx *cli.Context) error {
		pool := cx.String("pool")
		var out *pageFile
		var buf []byte
		var t tally
		var ps int
		r, err := eachBatch(cx, func(ctx context.Context, c *client.Client, h *ipc.Hello, keys []uint64, at int) error {
			ps = int(h.PageSize)
			if cap(buf) < len(keys)*ps {
				buf = make([]byte, len(keys)*ps)
			}
			codes, err := c.GetInto(ctx, pool, keys, buf[:len(keys)*ps])
			if err != nil {
				return err
			}
			// Opened once the pool answers: a pool that is not there
			// leaves no file behind.
			if out == nil {
				if out, err = openPageFile(cx.String("out")); err != nil {
					return err
				}
			}
			t.add(keys, codes)
			return out.write(at, buf, codes, ps)
		})
		if out != nil {
			if ferr := out.finish(int64(r.n) * int64(ps)); err == nil {
				err = ferr
			}
		}
		if err != nil {
			return err
		}
		return withDownNodes(cx, t.err("get", pool)) // pool.go
	},
}

var delCommand = &cli.Command{
	Name:      "delete",
	Usage:     "delete pages",
	UsageText: "s4d ctl delete --pool P --keys K-L",
	Flags:     withSocket(poolFlag, keysFlag),
	Action: func(cx *cli.Context) error {
		pool := cx.String("pool")
		var t tally
		_, err := eachBatch(cx, func(ctx context.Context, c *client.Client, _ *ipc.Hello, keys []uint64, _ int) error {
			codes, err := c.Del(ctx, pool, keys)
			t.add(keys, codes)
			return err
		})
		if err != nil {
			return err
		}
		if t.ok == t.n {
			fmt.Printf("deleted %d pages from pool %s\n", t.ok, pool)
		} else {
			fmt.Printf("deleted %d of %d pages from pool %s\n", t.ok, t.n, pool)
		}
		return t.err("del", pool)
	},
}

// pageRow is one inspected page.
type pageRow struct {
	ipc.PageInfo
	pageSize uint32
}

var inspectTable = &table[pageRow]{
	name:     "pages",
	defaults: strings.Fields("KEY CLASS STORED RATIO BACKEND FILL"),
	columns: []column[pageRow]{
		{"KEY", "the page's key", count, func(p pageRow) any { return p.Key }},
		{"CLASS", "zero, same, lz4, zstd or raw; the failure for a page not there", text, func(p pageRow) any {
			if p.Status != ipc.OK {
				return p.Status.String()
			}
			return p.Class
		}},
		{"STATUS", "ok, or why the page could not be inspected", text, func(p pageRow) any { return p.Status.String() }},
		// Exact bytes even without --bytes: a page is at most 64 KiB.
		{"STORED", "bytes stored for the page", count, func(p pageRow) any { return okOnly(p, uint64(p.Size)) }},
		{"RATIO", "page size / STORED", float, func(p pageRow) any {
			if p.Status != ipc.OK {
				return nil
			}
			return ratioOf(uint64(p.pageSize), uint64(p.Size))
		}},
		{"BACKEND", "engine that compressed it", text, func(p pageRow) any { return okOnly(p, p.Backend) }},
		{"FILL", "the repeated word of a same-filled page", text, func(p pageRow) any {
			if p.Status != ipc.OK || p.Class != "same" {
				return nil
			}
			return fmt.Sprintf("%#016x", p.Fill)
		}},
	},
}

func okOnly(p pageRow, v any) any {
	if p.Status != ipc.OK {
		return nil
	}
	return v
}

var inspectCommand = &cli.Command{
	Name:        "inspect",
	Usage:       "show how pages are stored",
	UsageText:   "s4d ctl inspect --pool P --keys K-L [--raw-out DIR] [--output COLS] [--noheadings] [--raw] [--json]",
	Description: "Columns:" + inspectTable.help(),
	Flags: withSocket(append(listFlags("the pages", "Columns are listed under DESCRIPTION."), poolFlag, keysFlag,
		&cli.StringFlag{Name: "raw-out", Usage: "write each page's stored bytes to DIR/<key>.<codec>"})...),
	Action: func(cx *cli.Context) error {
		o := optsOf(cx)
		if _, err := inspectTable.pick(o.output); err != nil {
			return err
		}
		dir := cx.String("raw-out")
		if dir != "" {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return err
			}
		}
		var rows []pageRow
		var t tally
		_, err := eachBatch(cx, func(ctx context.Context, c *client.Client, h *ipc.Hello, keys []uint64, _ int) error {
			infos, err := c.Inspect(ctx, cx.String("pool"), keys, dir != "")
			if err != nil {
				return err
			}
			codes := make([]ipc.Code, len(infos))
			for i, in := range infos {
				codes[i] = in.Status
				if in.Status == ipc.OK && dir != "" {
					if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("%d.%s", in.Key, in.Class)), in.Data, 0o644); err != nil {
						return err
					}
				}
				in.Data = nil // written out; not kept for the listing
				rows = append(rows, pageRow{in, h.PageSize})
			}
			t.add(keys, codes)
			return nil
		})
		if err != nil {
			return err
		}
		if err := inspectTable.print(os.Stdout, rows, o); err != nil {
			return err
		}
		return withDownNodes(cx, t.err("inspect", cx.String("pool"))) // pool.go
	},
}
