package ctl

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/s4d-project/s4d/client"
	"github.com/s4d-project/s4d/cmd/s4d/exitcode"
	"github.com/s4d-project/s4d/ipc"
)

// poolCommand moves a pool between daemons through their shared remote
// tier: export on the old host, import on the new one.
var poolCommand = &cli.Command{
	Name:  "pool",
	Usage: "move a pool to another daemon through the remote tier (--remote-tier)",
	Description: "export writes every page of your pool POOL to the cluster, under your user name;\n" +
		"import, on another host's daemon with the same cluster and key, reads them into your\n" +
		"pool of that name there. Uids may differ between the hosts; user names must match.",
	Subcommands: []*cli.Command{poolMoveCommand(ipc.PoolExport), poolMoveCommand(ipc.PoolImport)},
}

func poolMoveCommand(dir string) *cli.Command {
	return &cli.Command{
		Name:      dir,
		Usage:     dir + " a pool through the remote tier",
		UsageText: "s4d ctl pool " + dir + " POOL",
		Flags:     withSocket(),
		Action: func(cx *cli.Context) error {
			if cx.NArg() != 1 {
				return exitcode.UsageErr(fmt.Errorf("pool %s takes one pool name", dir))
			}
			pool := cx.Args().First()
			return withClient(func(ctx context.Context, c *client.Client) error {
				r, err := c.PoolMove(ctx, dir, pool)
				if err != nil {
					return err
				}
				verb := map[string]string{ipc.PoolExport: "exported", ipc.PoolImport: "imported"}[dir]
				fmt.Printf("%s pool %s of %s: %d pages in %d blocks (%s)\n", verb, r.Pool, r.User, r.Pages, r.Blocks, human(r.Bytes))
				return nil
			})(cx)
		},
	}
}

// printRemote is ctl stats' remote-tier paragraph.
func printRemote(w io.Writer, r *ipc.RemoteStats) {
	state := "up"
	if !r.Up {
		state = "DOWN"
	}
	quota := "no quota"
	if r.Quota > 0 {
		quota = "quota " + human(r.Quota)
	}
	fmt.Fprintf(w, "\nremote tier %s (host %s): %s, %s used, %s\n", r.URL, r.Host, state, human(r.UsedBytes), quota)
	fmt.Fprintf(w, "blocks written %d (%s), read %d (%s), deleted %d, swept %d\n",
		r.BlocksWritten, human(r.BytesWritten), r.BlocksRead, human(r.BytesRead), r.Deleted, r.Swept)
	fmt.Fprintf(w, "errors: write %d, read %d (corrupt %d, missing %d, stale %d), quota full %d; redirects %d, retries %d\n",
		r.WriteErrors, r.ReadErrors, r.Corrupt, r.Missing, r.Stale, r.QuotaFull, r.Redirects, r.Retries)
	if r.Spills > 0 || r.Pages > 0 {
		paused := ""
		if r.Paused {
			paused = ", PAUSED after a failure"
		}
		fmt.Fprintf(w, "below the backing file: %d pages in %d blocks; %d pages spilled in %d rounds, %d rounds failed, %d page reads failed%s\n",
			r.Pages, r.Blocks, r.PagesSpilled, r.Spills, r.SpillFailures, r.PageReadFails, paused)
	}
	for _, n := range r.Nodes {
		fmt.Fprintf(w, "node %s %s", n.Addr, n.Role)
		if n.Role == "master" {
			fmt.Fprintf(w, " (%d slots)", n.Slots)
		}
		if n.Down {
			fmt.Fprintf(w, ": DOWN %s: %s; %d commands failed at once", downFor(n), n.Cause, n.FastFails)
		} else {
			fmt.Fprint(w, ": up")
		}
		if n.Downs > 0 {
			fmt.Fprintf(w, " (down %d times)", n.Downs)
		}
		fmt.Fprintln(w)
	}
	if r.LastError != "" {
		fmt.Fprintf(w, "last error: %s\n", r.LastError)
	}
}

// downFor says since when a node is down: "since 09:01:02Z (1m40s)".
func downFor(n ipc.RemoteNode) string {
	t, err := time.Parse(time.RFC3339, n.DownSince)
	if err != nil {
		return "since " + n.DownSince
	}
	return fmt.Sprintf("since %s (%s ago)", n.DownSince, time.Since(t).Round(time.Second))
}

// withDownNodes adds to a command's error, when some of its pages failed,
// which nodes of the remote tier are down and since when (their pages
// answer FAILED until a probe finds them back): the daemon's STATS says.
func withDownNodes(cx *cli.Context, err error) error {
	var ie *ipc.Error
	if err == nil || !errors.As(err, &ie) || ie.Code != ipc.CodeFailed {
		return err
	}
	ctx, cancel := context.WithTimeout(cx.Context, 5*time.Second)
	defer cancel()
	c := dial(cx)
	defer c.Close()
	st, serr := c.Stats(ctx, "")
	if serr != nil || st.Remote == nil {
		return err
	}
	var down []string
	for _, n := range st.Remote.Nodes {
		if n.Down {
			down = append(down, fmt.Sprintf("node %s (%s) down %s: %s", n.Addr, n.Role, downFor(n), n.Cause))
		}
	}
	if len(down) == 0 {
		return err
	}
	if strings.Contains(st.Remote.LastError, "CLUSTERDOWN") {
		down = append(down, "the live masters answer CLUSTERDOWN: the cluster serves no slot while a master is lost unless cluster-require-full-coverage is no")
	}
	return fmt.Errorf("%w; remote tier: %s", err, strings.Join(down, "; "))
}
