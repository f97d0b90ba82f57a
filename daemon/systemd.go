package daemon

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/coreos/go-systemd/v22/activation"
	sd "github.com/coreos/go-systemd/v22/daemon"

	"github.com/s4d-project/s4d/pagecache"
	"github.com/s4d-project/s4d/settings"
)

// stuckAfter is how long batches may be in flight with none finishing
// before the daemon counts as wedged.
const stuckAfter = 60 * time.Second

// reprobeEvery is how often failed backends are probed again.
const reprobeEvery = 5 * time.Minute

// Run listens (on the socket systemd passed, or on our own), tells systemd
// when it is ready, keeps the status line and watchdog going, re-reads the
// configuration on SIGHUP through reload, and serves until ctx ends.
func (d *Daemon) Run(ctx context.Context, reload func() (Config, error)) error {
	lns, err := activation.Listeners()
	if err != nil {
		return fmt.Errorf("socket activation: %w", err)
	}
	switch len(lns) {
	case 0:
		if err := d.Listen(); err != nil {
			return err
		}
	case 1:
		if lns[0] == nil {
			return errors.New("socket activation: the passed socket is not a stream socket")
		}
		if err := d.UseListener(lns[0]); err != nil {
			return fmt.Errorf("socket activation: %w", err)
		}
		d.log.Info("using the socket passed by systemd", "addr", lns[0].Addr().String())
	default:
		return fmt.Errorf("socket activation: %d sockets passed, want exactly one", len(lns))
	}

	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)

	served := make(chan error, 1)
	sctx, stop := context.WithCancel(ctx)
	defer stop()
	go func() { served <- d.Serve(sctx) }()

	sd.SdNotify(false, "READY=1\nSTATUS="+d.StatusLine())
	wd, _ := sd.SdWatchdogEnabled(false)
	tick := 5 * time.Second
	if wd > 0 && wd/3 < tick {
		tick = wd / 3
	}
	t := time.NewTicker(tick)
	defer t.Stop()
	retry := time.NewTicker(reprobeEvery)
	defer retry.Stop()
	for {
		select {
		case <-retry.C:
			if back := d.set.Retry(); len(back) > 0 {
				d.log.Info("failed backends are back in service", "backends", back)
			}
		case <-hup:
			sd.SdNotify(false, "RELOADING=1")
			d.reload(reload)
			sd.SdNotify(false, "READY=1\nSTATUS="+d.StatusLine())
		case <-t.C:
			err := d.SelfCheck()
			if err != nil {
				d.log.Error("self-check failed; withholding the watchdog ping", "err", err)
				sd.SdNotify(false, "STATUS=unhealthy: "+err.Error())
				continue
			}
			state := "STATUS=" + d.StatusLine()
			if wd > 0 {
				state += "\nWATCHDOG=1"
			}
			sd.SdNotify(false, state)
		case <-ctx.Done():
			sd.SdNotify(false, "STOPPING=1\nSTATUS=stopping: answering requests already received")
			return <-served
		case err := <-served:
			return err
		}
	}
}

// reload applies what can change while running and logs what cannot.
func (d *Daemon) reload(load func() (Config, error)) {
	if load == nil {
		return
	}
	nc, err := load()
	if err != nil {
		d.log.Error("reload failed; keeping the running configuration", "err", err)
		return
	}
	d.cfg.MemLimit = nc.MemLimit
	d.store.SetMemLimit(nc.MemLimit)
	d.cfg.PoolsPerUser, d.cfg.UserQuota = nc.PoolsPerUser, nc.UserQuota
	d.store.SetLimits(pagecache.Limits{PoolsPerUser: nc.PoolsPerUser, BytesPerUser: nc.UserQuota})
	if d.cfg.Level != nil {
		d.cfg.Level.Set(nc.LogLevel)
	}
	d.cfg.LogLevel = nc.LogLevel
	if nc.Backend != d.cfg.Backend {
		if _, ok := d.set.Get(nc.Backend); nc.Backend == "auto" || ok {
			d.disp.SetPreference(nc.Backend)
			d.cfg.Backend = nc.Backend
		} else {
			d.log.Error("reload: backend not usable; keeping the current one", "backend", nc.Backend)
		}
	}
	if keys := settings.RestartOnly(d.cfg, nc); len(keys) > 0 {
		d.log.Warn("reload: these settings take effect only after a restart", "keys", keys)
	}
	d.log.Info("reloaded", "mem_limit", nc.MemLimit, "log_level", nc.LogLevel.String(), "backend", d.disp.Preference())
}

// SelfCheck says whether the daemon can still do its job: the store
// answers and batches handed to backends keep finishing.
func (d *Daemon) SelfCheck() error {
	if err := faultSelfCheck(); err != nil {
		return err
	}
	done := make(chan struct{})
	go func() { d.store.Stats(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		return errors.New("the page store does not answer")
	}
	return d.disp.Progress(stuckAfter)
}

// StatusLine is the one-line summary systemd shows.
func (d *Daemon) StatusLine() string {
	s := d.store.Stats()
	ratio := "-"
	if s.ComprDataSize > 0 {
		ratio = fmt.Sprintf("%.2f", float64(s.OrigDataSize)/float64(s.ComprDataSize))
	}
	return fmt.Sprintf("backend %s, %d pages stored, ratio %s, %d MiB held", d.disp.InUse(), s.Pages, ratio, s.MemUsedTotal>>20)
}
