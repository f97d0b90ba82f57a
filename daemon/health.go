package daemon

import (
	"errors"
	"fmt"
	"time"

	"github.com/s4d-project/s4d/pagecache"
	"github.com/s4d-project/s4d/settings"
)

// stuckAfter is how long batches may be in flight with none finishing
// before the daemon counts as wedged.
const stuckAfter = 60 * time.Second

// Reload applies what can change while running (the settings marked so)
// and logs what cannot.
func (d *Daemon) Reload(nc Config) {
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
			d.router.SetPreference(nc.Backend)
			d.cfg.Backend = nc.Backend
		} else {
			d.log.Error("reload: backend not usable; keeping the current one", "backend", nc.Backend)
		}
	}
	if keys := settings.RestartOnly(d.cfg, nc); len(keys) > 0 {
		d.log.Warn("reload: these settings take effect only after a restart", "keys", keys)
	}
	d.log.Info("reloaded", "mem_limit", nc.MemLimit, "log_level", nc.LogLevel.String(), "backend", d.router.Preference())
}

// RetryBackends probes failed backends again and logs those back in service.
func (d *Daemon) RetryBackends() {
	if back := d.set.Retry(); len(back) > 0 {
		d.log.Info("failed backends are back in service", "backends", back)
	}
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
	return d.router.Progress(stuckAfter)
}

// StatusLine is the one-line summary systemd shows.
func (d *Daemon) StatusLine() string {
	s := d.store.Stats()
	ratio := "-"
	if s.ComprDataSize > 0 {
		ratio = fmt.Sprintf("%.2f", float64(s.OrigDataSize)/float64(s.ComprDataSize))
	}
	return fmt.Sprintf("backend %s, %d pages stored, ratio %s, %d MiB held", d.router.InUse(), s.Pages, ratio, s.MemUsedTotal>>20)
}
