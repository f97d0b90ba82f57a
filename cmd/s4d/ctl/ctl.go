// Package ctl is `s4d ctl`: it talks to a running daemon through ipc only.
package ctl

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/s4d-project/s4d/client"
	"github.com/s4d-project/s4d/cmd/s4d/exitcode"
	"github.com/s4d-project/s4d/ipc"
	"github.com/s4d-project/s4d/settings/bytesize"
)

var socketFlag = &cli.StringFlag{Name: "socket", EnvVars: []string{"S4D_SOCKET"},
	Usage: "daemon socket (default " + ipc.DefaultSocketPath + ")"}

var timeoutFlag = &cli.DurationFlag{Name: "timeout", Value: 60 * time.Second, Usage: "give up after this long"}

func withSocket(flags ...cli.Flag) []cli.Flag {
	return append([]cli.Flag{socketFlag, timeoutFlag}, flags...)
}

// Command groups the client subcommands.
var Command = &cli.Command{
	Name:        "ctl",
	Usage:       "talk to a running daemon",
	Flags:       withSocket(),
	Subcommands: []*cli.Command{statsCommand, putCommand, getCommand, delCommand, inspectCommand, poolsCommand, compactCommand, watchCommand, idleCommand, recompressCommand, codecCommand, writebackCommand},
}

// client builds a client from the innermost --socket that was set.
func dial(cx *cli.Context) *client.Client {
	for _, c := range cx.Lineage() {
		if c.IsSet("socket") {
			return &client.Client{Socket: c.String("socket"), Name: "s4d-ctl"}
		}
	}
	return &client.Client{Name: "s4d-ctl"}
}

func timeout(cx *cli.Context) (context.Context, context.CancelFunc) {
	d := 60 * time.Second
	for _, c := range cx.Lineage() {
		if c.IsSet("timeout") {
			d = c.Duration("timeout")
			break
		}
	}
	return context.WithTimeout(cx.Context, d)
}

// parseKeys reads "K" or "K-L" (inclusive).
func parseKeys(s string) ([]uint64, error) {
	lo, hi, isRange := strings.Cut(s, "-")
	a, err := strconv.ParseUint(lo, 0, 64)
	if err != nil {
		return nil, fmt.Errorf("--keys %q: want K or K-L", s)
	}
	b := a
	if isRange {
		if b, err = strconv.ParseUint(hi, 0, 64); err != nil || b < a {
			return nil, fmt.Errorf("--keys %q: want K or K-L with K <= L", s)
		}
	}
	if b-a >= 1<<24 {
		return nil, fmt.Errorf("--keys %q: at most %d keys at a time", s, 1<<24)
	}
	keys := make([]uint64, 0, b-a+1)
	for k := a; ; k++ {
		keys = append(keys, k)
		if k == b {
			break
		}
	}
	return keys, nil
}

// withClient makes an Action that runs do with a connected client and the
// command's deadline.
func withClient(do func(ctx context.Context, c *client.Client) error) cli.ActionFunc {
	return func(cx *cli.Context) error {
		ctx, cancel := timeout(cx)
		defer cancel()
		c := dial(cx)
		defer c.Close()
		return do(ctx, c)
	}
}

// overKeys parses --keys, connects, and calls do for each run of keys the
// daemon takes in one request, collecting the per-page codes in key order.
func overKeys(cx *cli.Context, do func(ctx context.Context, c *client.Client, h *ipc.Hello, keys []uint64) ([]ipc.Code, error)) ([]uint64, []ipc.Code, error) {
	ctx, cancel := timeout(cx)
	defer cancel()
	keys, err := parseKeys(cx.String("keys"))
	if err != nil {
		return nil, nil, exitcode.UsageErr(err)
	}
	c := dial(cx)
	defer c.Close()
	h, err := c.Hello(ctx)
	if err != nil {
		return nil, nil, err
	}
	var codes []ipc.Code
	for _, b := range batches(h, len(keys)) {
		cs, err := do(ctx, c, h, keys[b[0]:b[1]])
		if err != nil {
			return nil, nil, err
		}
		codes = append(codes, cs...)
	}
	return keys, codes, nil
}

// batches splits n keys into runs the daemon accepts in one request.
func batches(h *ipc.Hello, n int) [][2]int {
	per := int(h.MaxBatchPages)
	if fit := (int(h.MaxFrame) - ipc.HeaderSize - 2 - ipc.MaxPoolName - 8) / (8 + int(h.PageSize)); fit < per {
		per = fit
	}
	per = max(per, 1)
	var out [][2]int
	for lo := 0; lo < n; lo += per {
		out = append(out, [2]int{lo, min(lo+per, n)})
	}
	return out
}

// human prints a byte count as every s4d command does: 4K, 1.5M, 2G.
var human = bytesize.Format

// pageFailure summarises per-page codes as one error line.
func pageFailure(what string, keys []uint64, codes []ipc.Code) error {
	if err := ipc.PageError(keys, codes); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}
