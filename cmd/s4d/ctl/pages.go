package ctl

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/s4d-project/s4d/client"
	"github.com/s4d-project/s4d/ipc"
)

var poolFlag = &cli.StringFlag{Name: "pool", Required: true, Usage: "pool name"}
var keysFlag = &cli.StringFlag{Name: "keys", Required: true, Usage: "key or inclusive range K-L"}

var putCommand = &cli.Command{
	Name:      "put",
	Usage:     "store a file's pages under consecutive keys",
	UsageText: "s4d ctl put --pool P --file F [--first-key K]",
	Flags: withSocket(poolFlag,
		&cli.StringFlag{Name: "file", Required: true, Usage: "file whose size is a multiple of the page size"},
		&cli.Uint64Flag{Name: "first-key", Usage: "key of the file's first page"}),
	Action: func(cx *cli.Context) error {
		ctx, cancel := timeout(cx)
		defer cancel()
		c := dial(cx)
		defer c.Close()
		h, err := c.Hello(ctx)
		if err != nil {
			return err
		}
		data, err := os.ReadFile(cx.String("file"))
		if err != nil {
			return err
		}
		ps := int(h.PageSize)
		if len(data) == 0 || len(data)%ps != 0 {
			return fmt.Errorf("%s is %d bytes: not a whole number of %d-byte pages", cx.String("file"), len(data), ps)
		}
		n := len(data) / ps
		first := cx.Uint64("first-key")
		keys := make([]uint64, n)
		for i := range keys {
			keys[i] = first + uint64(i)
		}
		codes := make([]ipc.Code, 0, n)
		for _, b := range batches(h, n) {
			cs, err := c.Put(ctx, cx.String("pool"), keys[b[0]:b[1]], data[b[0]*ps:b[1]*ps])
			if err != nil {
				return err
			}
			codes = append(codes, cs...)
		}
		if err := pageFailure("put", keys, codes); err != nil {
			return err
		}
		fmt.Printf("stored %d pages in pool %s, keys %d-%d\n", n, cx.String("pool"), first, keys[n-1])
		return nil
	},
}

var getCommand = &cli.Command{
	Name:      "get",
	Usage:     "fetch pages into a file",
	UsageText: "s4d ctl get --pool P --keys K-L --out F",
	Flags:     withSocket(poolFlag, keysFlag, &cli.StringFlag{Name: "out", Required: true, Usage: "file to write ('-' for stdout)"}),
	Action: func(cx *cli.Context) error {
		var data []byte
		keys, codes, err := overKeys(cx, func(ctx context.Context, c *client.Client, _ *ipc.Hello, keys []uint64) ([]ipc.Code, error) {
			pages, codes, err := c.Get(ctx, cx.String("pool"), keys)
			data = append(data, pages...)
			return codes, err
		})
		if err != nil {
			return err
		}
		if err := pageFailure("get", keys, codes); err != nil {
			return err
		}
		if cx.String("out") == "-" {
			_, err = os.Stdout.Write(data)
			return err
		}
		return os.WriteFile(cx.String("out"), data, 0o644)
	},
}

var delCommand = &cli.Command{
	Name:      "del",
	Usage:     "delete pages",
	UsageText: "s4d ctl del --pool P --keys K-L",
	Flags:     withSocket(poolFlag, keysFlag),
	Action: func(cx *cli.Context) error {
		keys, codes, err := overKeys(cx, func(ctx context.Context, c *client.Client, _ *ipc.Hello, keys []uint64) ([]ipc.Code, error) {
			return c.Del(ctx, cx.String("pool"), keys)
		})
		if err != nil {
			return err
		}
		if err := pageFailure("del", keys, codes); err != nil {
			return err
		}
		fmt.Printf("deleted %d pages from pool %s\n", len(keys), cx.String("pool"))
		return nil
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
		keys, codes, err := overKeys(cx, func(ctx context.Context, c *client.Client, h *ipc.Hello, keys []uint64) ([]ipc.Code, error) {
			infos, err := c.Inspect(ctx, cx.String("pool"), keys, dir != "")
			if err != nil {
				return nil, err
			}
			codes := make([]ipc.Code, len(infos))
			for i, in := range infos {
				codes[i] = in.Status
				if in.Status == ipc.OK && dir != "" {
					if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("%d.%s", in.Key, in.Class)), in.Data, 0o644); err != nil {
						return nil, err
					}
				}
				in.Data = nil // written out; not kept for the listing
				rows = append(rows, pageRow{in, h.PageSize})
			}
			return codes, nil
		})
		if err != nil {
			return err
		}
		if err := inspectTable.print(os.Stdout, rows, o); err != nil {
			return err
		}
		return pageFailure("inspect", keys, codes)
	},
}
