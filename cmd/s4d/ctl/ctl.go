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

// The flag reads no environment variable itself: urfave/cli counts one as
// "set" on every command, so $S4D_SOCKET would beat a --socket typed on a
// parent command. An unset flag leaves the choice to the client, which
// reads $S4D_SOCKET.
var socketFlag = &cli.StringFlag{Name: "socket",
	Usage: "daemon socket (default $S4D_SOCKET, else " + ipc.DefaultSocketPath + ")"}

var timeoutFlag = &cli.DurationFlag{Name: "timeout", Value: 60 * time.Second, Usage: "give up after this long"}

func withSocket(flags ...cli.Flag) []cli.Flag {
	return append([]cli.Flag{socketFlag, timeoutFlag}, flags...)
}

// Command groups the client subcommands.
var Command = &cli.Command{
	Name:        "ctl",
	Usage:       "talk to a running daemon",
	Flags:       withSocket(),
	Subcommands: []*cli.Command{statsCommand, putCommand, getCommand, delCommand, inspectCommand, poolsCommand, compactCommand, watchCommand, idleCommand, recompressCommand, codecCommand, writebackCommand, poolCommand},
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

// keyRange is the inclusive run of keys --keys names.
type keyRange struct {
	first uint64
	n     int
}

// maxKeys bounds one command's range: a typo such as 0-99999999999 would
// otherwise run for hours.
const maxKeys = 1 << 24

// parseKeys reads "K" or "K-L" (inclusive).
func parseKeys(s string) (keyRange, error) {
	lo, hi, isRange := strings.Cut(s, "-")
	a, err := strconv.ParseUint(lo, 0, 64)
	if err != nil {
		return keyRange{}, fmt.Errorf("--keys %q: want K or K-L", s)
	}
	b := a
	if isRange {
		if b, err = strconv.ParseUint(hi, 0, 64); err != nil || b < a {
			return keyRange{}, fmt.Errorf("--keys %q: want K or K-L with K <= L", s)
		}
	}
	if b-a >= maxKeys {
		return keyRange{}, fmt.Errorf("--keys %q: at most %d keys at a time", s, maxKeys)
	}
	return keyRange{first: a, n: int(b-a) + 1}, nil
}

// keys fills dst with the keys at positions lo to hi of the range.
func (r keyRange) keys(dst []uint64, lo, hi int) []uint64 {
	dst = dst[:0]
	for i := lo; i < hi; i++ {
		dst = append(dst, r.first+uint64(i))
	}
	return dst
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

// eachBatch parses --keys, connects, and calls do for each run of keys
// that goes in one request, in key order; at is the position of keys[0]
// in the range. Only one run's keys (and pages) are held at a time, so a
// command over millions of keys stays small.
func eachBatch(cx *cli.Context, do func(ctx context.Context, c *client.Client, h *ipc.Hello, keys []uint64, at int) error) (keyRange, error) {
	ctx, cancel := timeout(cx)
	defer cancel()
	r, err := parseKeys(cx.String("keys"))
	if err != nil {
		return r, exitcode.UsageErr(err)
	}
	c := dial(cx)
	defer c.Close()
	h, err := c.Hello(ctx)
	if err != nil {
		return r, err
	}
	var keys []uint64
	for _, b := range batches(h, r.n) {
		keys = r.keys(keys, b[0], b[1])
		if err := do(ctx, c, h, keys, b[0]); err != nil {
			if ctx.Err() != nil {
				// Not a bare "context deadline exceeded": whose deadline.
				err = fmt.Errorf("no answer within the command's --timeout, at key %d (%w)", keys[0], err)
			}
			return r, err
		}
	}
	return r, nil
}

// batchBytes bounds the pages of one request the control tool makes, and
// so what it holds: the daemon would take 16384 pages (64 MiB) at once.
const batchBytes = 4 << 20

// perBatch is how many pages go in one request: what the daemon accepts,
// within batchBytes.
func perBatch(h *ipc.Hello) int {
	per := min(int(h.MaxBatchPages), batchBytes/max(int(h.PageSize), 1))
	if fit := (int(h.MaxFrame) - ipc.HeaderSize - 2 - ipc.MaxPoolName - 8) / (8 + int(h.PageSize)); fit < per {
		per = fit
	}
	return max(per, 1)
}

// batches splits n keys into runs of perBatch.
func batches(h *ipc.Hello, n int) [][2]int {
	per := perBatch(h)
	var out [][2]int
	for lo := 0; lo < n; lo += per {
		out = append(out, [2]int{lo, min(lo+per, n)})
	}
	return out
}

// human prints a byte count as every s4d command does: 4K, 1.5M, 2G.
var human = bytesize.Format

// tally counts the pages of a command's requests as their codes come
// back, keeping the first key of each kind of failure, so that a command
// over millions of keys need not keep every code.
type tally struct {
	n, ok, missing, failed     int
	firstMissing, firstFailure uint64
	failure                    ipc.Code
}

func (t *tally) add(keys []uint64, codes []ipc.Code) {
	for i, c := range codes {
		t.n++
		switch c {
		case ipc.OK:
			t.ok++
		case ipc.CodeNotFound:
			if t.missing == 0 {
				t.firstMissing = keys[i]
			}
			t.missing++
		default:
			if t.failed == 0 {
				t.firstFailure, t.failure = keys[i], c
			}
			t.failed++
		}
	}
}

// err is nil when every page was OK. Otherwise it says how many keys
// failed, and how many were not in the pool: a failure other than a
// missing key decides the exit status, as the worse news.
func (t *tally) err(what, pool string) error {
	var missing string
	if t.missing > 0 {
		missing = fmt.Sprintf("%d of %d keys in pool %s, first key %d", t.missing, t.n, pool, t.firstMissing)
	}
	if t.failed > 0 {
		msg := fmt.Sprintf("%d of %d pages, first key %d", t.failed, t.n, t.firstFailure)
		if missing != "" {
			msg += "; not found: " + missing
		}
		return fmt.Errorf("%s: %w", what, &ipc.Error{Code: t.failure, Msg: msg})
	}
	if t.missing > 0 {
		return fmt.Errorf("%s: %w", what, &ipc.Error{Code: ipc.CodeNotFound, Msg: missing})
	}
	return nil
}
