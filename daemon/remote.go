package daemon

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/s4d-project/s4d/cold"
	"github.com/s4d-project/s4d/ipc"
	"github.com/s4d-project/s4d/remote"
)

// The systemd credentials the remote tier reads when no file is set
// (LoadCredential=s4d-remote-key:/etc/s4d/remote.key in a drop-in).
const (
	credRemoteKey   = "s4d-remote-key"
	credRemoteCreds = "s4d-remote-credentials"
)

// credential is the file a secret setting names, or else the systemd
// credential of that name when the service was given one.
func credential(setting, name string) string {
	if setting != "" {
		return setting
	}
	if dir := os.Getenv("CREDENTIALS_DIRECTORY"); dir != "" {
		p := filepath.Join(dir, name)
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return ""
}

// remoteConfig turns the settings into the tier's, secrets resolved.
func remoteConfig(cfg *Config) (remote.TierConfig, error) {
	host := cfg.RemoteHost
	if host == "" {
		h, err := os.Hostname()
		if err != nil {
			return remote.TierConfig{}, fmt.Errorf("remote tier: host name: %w (set --remote-host)", err)
		}
		host = h
	}
	return remote.TierConfig{URL: cfg.RemoteTier, CAFile: cfg.RemoteCAFile,
		CredFile: credential(cfg.RemoteCredentials, credRemoteCreds),
		KeyFile:  credential(cfg.RemoteKeyFile, credRemoteKey),
		Host:     host, Quota: cfg.RemoteQuota, NoEvictOK: cfg.RemoteNoEviction,
		Options: remote.Options{Timeout: cfg.RemoteTimeout}}, nil
}

// openRemote connects the remote tier, if one is set: nil without one. A
// tier that cannot work stops the start with its reason, rather than
// losing pages later.
func openRemote(ctx context.Context, cfg *Config) (*remote.Tier, error) {
	if cfg.RemoteTier == "" {
		if cfg.RemoteCredentials != "" || cfg.RemoteKeyFile != "" || cfg.RemoteQuota != 0 {
			return nil, fmt.Errorf("remote-credentials, remote-key-file and remote-quota need --remote-tier")
		}
		return nil, nil
	}
	tc, err := remoteConfig(cfg)
	if err != nil {
		return nil, err
	}
	// The start waits 20 s at most (or the tier's timeout, if longer): a
	// cluster that is down is a reason not to start.
	ctx, cancel := context.WithTimeout(ctx, max(20*time.Second, cfg.RemoteTimeout))
	defer cancel()
	t, err := remote.OpenTier(ctx, tc)
	if err != nil {
		return nil, fmt.Errorf("remote tier: %w", err)
	}
	cfg.Log.Info("remote tier", "url", cfg.RemoteTier, "host", t.Host(), "quota", cfg.RemoteQuota, "timeout", cfg.RemoteTimeout)
	return t, nil
}

// remoteStats is STATS's remote section; nil without a remote tier. It
// asks the cluster (a second at most), so the up flag is current.
func (d *Daemon) remoteStats() *ipc.RemoteStats {
	t := d.remote
	if t == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(d.ctx, time.Second)
	defer cancel()
	t.Ping(ctx)
	s := t.Stats(ctx)
	ls, _ := d.cold.RemoteStats()
	return &ipc.RemoteStats{Pages: uint64(ls.Objects), Blocks: uint64(ls.Blocks), Spills: ls.Spills,
		PagesSpilled: ls.Spilled, SpillFailures: ls.Failures, PageReadFails: ls.ReadFailures, Paused: ls.Paused,
		URL: d.cfg.RemoteTier, Host: s.Host, Up: s.Up, LastError: s.LastError,
		Quota: s.Quota, UsedBytes: s.Used, BlocksWritten: s.BlocksWritten, BytesWritten: s.BytesWritten,
		BlocksRead: s.BlocksRead, BytesRead: s.BytesRead, WriteErrors: s.WriteErrors, ReadErrors: s.ReadErrors,
		Corrupt: s.Corrupt, Missing: s.Missing, Stale: s.Stale, Deleted: s.Deleted, Swept: s.Swept,
		QuotaFull: s.QuotaFull, Redirects: s.Moved + s.Ask, Retries: s.Retried,
		ReadLatency:  ipc.NewHistogram(s.LatencyBounds, s.ReadLatency, s.ReadLatencySum),
		WriteLatency: ipc.NewHistogram(s.LatencyBounds, s.WriteLatency, s.WriteLatencySum),
		Nodes:        remoteNodes(s.Nodes)}
}

// remoteNodes is the tier's per-node state on the wire.
func remoteNodes(ns []remote.NodeState) []ipc.RemoteNode {
	out := make([]ipc.RemoteNode, len(ns))
	for i, n := range ns {
		out[i] = ipc.RemoteNode{Addr: n.Addr, Role: "replica", Slots: n.Slots, Down: n.Down, Cause: n.Cause,
			Downs: n.Downs, FastFails: n.FastFails}
		if n.Master {
			out[i].Role = "master"
		}
		if n.Down {
			out[i].DownSince = n.Since.UTC().Format(time.RFC3339)
		}
	}
	return out
}

// coldOptions makes the remote tier the level below the backing file,
// where there is one (without, it serves pool export/import only).
func (d *Daemon) coldOptions() []cold.Option {
	if d.remote == nil || d.cfg.BackingFile == "" {
		return nil
	}
	return []cold.Option{cold.WithRemote(d.remote)}
}

// sweepEvery is how often blocks no index names are looked for.
const sweepEvery = 10 * time.Minute

// startRemoteSweep sweeps the cluster of this host's blocks that no
// table names (a crash after a spill and before its checkpoint) at start
// and every sweepEvery, until the daemon stops.
func (d *Daemon) startRemoteSweep() {
	if d.remote == nil || d.cfg.BackingFile == "" {
		return
	}
	go func() {
		for {
			ctx, cancel := context.WithTimeout(d.ctx, time.Minute)
			n, err := d.cold.SweepRemote(ctx)
			cancel()
			if err != nil && d.ctx.Err() == nil {
				d.log.Warn("remote tier sweep", "err", err)
			} else if n > 0 {
				d.log.Info("remote tier sweep", "blocks_deleted", n)
			}
			select {
			case <-d.quit:
				return
			case <-time.After(sweepEvery):
			}
		}
	}()
}
