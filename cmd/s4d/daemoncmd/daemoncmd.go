// Package daemoncmd is `s4d daemon`.
package daemoncmd

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"runtime/trace"
	"strings"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	_ "github.com/s4d-project/s4d/backends/all"
	"github.com/s4d-project/s4d/cmd/s4d/buildinfo"
	"github.com/s4d-project/s4d/cmd/s4d/exitcode"
	"github.com/s4d-project/s4d/daemon"
	"github.com/s4d-project/s4d/metrics"
	"github.com/s4d-project/s4d/settings"
)

// Command runs the daemon in the foreground.
var Command = &cli.Command{
	Name:      "daemon",
	Usage:     "serve the page store on a Unix socket",
	UsageText: "s4d daemon [--config FILE] [options]",
	Description: "Serves the compressed page store on its Unix socket, and the swap devices of the\n" +
		"configuration's [[swap]] tables, until SIGTERM or SIGINT. Every option is also a key of\n" +
		"the configuration file, with underscores for dashes: s4d.toml(5) describes each in full,\n" +
		"and says which a reload (SIGHUP) changes. A boolean option may stand alone (--persist)\n" +
		"or take true or false.",
	Flags: append(append([]cli.Flag{
		&cli.StringFlag{Name: "config", Value: settings.DefaultFile, EnvVars: []string{"S4D_CONFIG"}, Category: catSocket, Usage: "`FILE` configuration file; flags that are set win over it"},
	}, settingFlags()...),
		// For profiling the request path; written when the daemon stops.
		&cli.StringFlag{Name: "cpuprofile", Hidden: true, Usage: "write a CPU profile to this file"},
		&cli.StringFlag{Name: "mutexprofile", Hidden: true, Usage: "write a profile of lock contention to this file on exit"},
		&cli.StringFlag{Name: "trace", Hidden: true, Usage: "write an execution trace (go tool trace) to this file"},
	),
	Action: run,
}

func run(cx *cli.Context) error {
	level := new(slog.LevelVar)
	sink := newLogSink(os.Stderr, 256<<10)
	defer sink.Close(2 * time.Second)
	log := slog.New(slog.NewTextHandler(sink, &slog.HandlerOptions{Level: level}))
	load := func() (daemon.Config, error) { return configure(cx) }
	cfg, err := load()
	if err != nil {
		return err
	}
	level.Set(cfg.LogLevel)
	cfg.Log, cfg.Level = log, level
	for _, note := range cfg.Deprecated {
		log.Warn(note)
	}
	// Opened before the backends are probed and calibrated, so a refused
	// address fails at once. A socket passed by systemd wins.
	mln, err := metricsFromSystemd()
	if err != nil {
		return err
	}
	if mln == nil && cfg.MetricsListen != "" {
		if mln, err = metrics.Listen(cfg.MetricsListen); err != nil {
			return err
		}
	}
	if mln != nil {
		defer mln.Close()
	}
	// A stop asked for while the engines are being timed (most of a
	// minute for WGSL on a software Vulkan) ends the start cleanly.
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	d, err := daemon.New(ctx, cfg)
	if err != nil {
		if ctx.Err() != nil {
			log.Info("stopped while starting", "err", err)
			return nil
		}
		return err
	}
	if mln != nil {
		info := buildinfo.Get()
		stopMetrics := serveMetrics(mln, metrics.Handler(d, info.Version, info.Commit, log), log)
		defer stopMetrics()
	}
	if f := cx.String("cpuprofile"); f != "" {
		out, err := os.Create(f)
		if err != nil {
			return err
		}
		defer out.Close()
		if err := pprof.StartCPUProfile(out); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	if f := cx.String("mutexprofile"); f != "" {
		runtime.SetMutexProfileFraction(1)
		defer func() {
			if out, err := os.Create(f); err == nil {
				pprof.Lookup("mutex").WriteTo(out, 0)
				out.Close()
			}
		}()
	}
	if f := cx.String("trace"); f != "" {
		out, err := os.Create(f)
		if err != nil {
			return err
		}
		defer out.Close()
		if err := trace.Start(out); err != nil {
			return err
		}
		defer trace.Stop()
	}
	return serve(ctx, d, log, load)
}

// serveMetrics serves /metrics on ln until the stop it returns is called.
// stop returns once the server has shut down, its listener with it: it
// leaves no goroutine behind, and the listener is never closed under a
// running server (which logged a stray error at every clean stop).
func serveMetrics(ln net.Listener, h http.Handler, log *slog.Logger) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		metrics.Serve(ctx, ln, h, log)
	}()
	return func() {
		cancel()
		<-done
	}
}

// settingFlags are the flags of every setting (package settings).
func settingFlags() []cli.Flag {
	var out []cli.Flag
	for _, st := range settings.Table {
		h, ok := daemonHelp[st.Name]
		if !ok {
			h = flagHelp{catOther, st.Usage}
		}
		f := &cli.StringFlag{Name: st.Name, Value: st.Default(), Usage: h.usage, Category: h.cat, Hidden: st.Hidden}
		if st.Bool && !strings.HasPrefix(f.Usage, "`") { // main lets the flag stand alone
			f.Usage = "`true|false` " + f.Usage
		}
		if st.Env != "" {
			f.EnvVars = []string{st.Env}
		}
		out = append(out, f)
	}
	return out
}

// configure builds the configuration: defaults, then the config file, then
// the flags and environment variables that were set, which win.
func configure(cx *cli.Context) (daemon.Config, error) {
	set := map[string]string{}
	for _, st := range settings.Table {
		if cx.IsSet(st.Name) {
			set[st.Name] = cx.String(st.Name)
		}
	}
	cfg, err := settings.Load(cx.String("config"), cx.IsSet("config"), set)
	if inv := (*settings.InvalidError)(nil); errors.As(err, &inv) {
		return cfg, exitcode.UsageErr(err)
	}
	if err != nil {
		return cfg, err
	}
	if cfg.MetricsListen != "" {
		if _, _, err := metrics.CheckAddress(cfg.MetricsListen); err != nil {
			return cfg, exitcode.UsageErr(err)
		}
	}
	return cfg, nil
}
