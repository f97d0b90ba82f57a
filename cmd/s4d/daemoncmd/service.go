package daemoncmd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/coreos/go-systemd/v22/activation"
	sd "github.com/coreos/go-systemd/v22/daemon"

	"github.com/s4d-project/s4d/daemon"
)

// reprobeEvery is how often failed backends are probed again.
const reprobeEvery = 5 * time.Minute

// serve runs d as a service: it listens (on the socket systemd passed, or
// on its own), tells systemd when it is ready, keeps the status line and
// watchdog going, re-reads the configuration on SIGHUP through reload, and
// serves until ctx ends.
func serve(ctx context.Context, d *daemon.Daemon, log *slog.Logger, reload func() (daemon.Config, error)) error {
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
		log.Info("using the socket passed by systemd", "addr", lns[0].Addr().String())
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
			d.RetryBackends()
		case <-hup:
			sd.SdNotify(false, "RELOADING=1")
			if nc, err := reload(); err != nil {
				log.Error("reload failed; keeping the running configuration", "err", err)
			} else {
				d.Reload(nc)
			}
			sd.SdNotify(false, "READY=1\nSTATUS="+d.StatusLine())
		case <-t.C:
			err := d.SelfCheck()
			if err != nil {
				log.Error("self-check failed; withholding the watchdog ping", "err", err)
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
