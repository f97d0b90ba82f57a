// Package daemoncmd is `s4d daemon`.
package daemoncmd

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"runtime/trace"
	"strconv"
	"syscall"

	"github.com/urfave/cli/v2"

	_ "github.com/s4d-project/s4d/backends/all"
	"github.com/s4d-project/s4d/cmd/s4d/buildinfo"
	"github.com/s4d-project/s4d/daemon"
	"github.com/s4d-project/s4d/ipc"
	"github.com/s4d-project/s4d/metrics"
)

// Command runs the daemon in the foreground.
var Command = &cli.Command{
	Name:  "daemon",
	Usage: "serve the page store on a Unix socket",
	Flags: []cli.Flag{
		&cli.StringFlag{Name: "config", Value: daemon.DefaultConfigFile, EnvVars: []string{"S4D_CONFIG"}, Usage: "configuration file; flags that are set win over it"},
		&cli.StringFlag{Name: "socket", Value: ipc.DefaultSocketPath, EnvVars: []string{"S4D_SOCKET"}, Usage: "Unix socket to listen on"},
		&cli.StringFlag{Name: "socket-mode", Value: "0660", Usage: "permissions of the socket file (octal)"},
		&cli.StringFlag{Name: "mem-limit", Value: "0", EnvVars: []string{"S4D_MEM_LIMIT"}, Usage: "memory for compressed pages, bytes with K/M/G/T suffix; 0 = no limit"},
		&cli.StringFlag{Name: "backend", Value: "auto", EnvVars: []string{"S4D_BACKEND"}, Usage: "auto, or a backend to prefer: cpu, webgpu, cuda"},
		&cli.StringFlag{Name: "codec", Value: "lz4", EnvVars: []string{"S4D_CODEC"}, Usage: "lz4 or zstd"},
		&cli.IntFlag{Name: "page-size", Value: 4096, Usage: "page size in bytes: a power of two from 4096 to 65536"},
		&cli.IntFlag{Name: "workers", Usage: "CPU compression goroutines per batch; 0 = one per core"},
		&cli.StringFlag{Name: "webgpu-lib", EnvVars: []string{"S4D_WEBGPU_LIB"}, Usage: "path of a webgpu.h library (Dawn); default: search"},
		&cli.StringFlag{Name: "nvcomp-lib", EnvVars: []string{"S4D_NVCOMP_LIB"}, Usage: "path of libnvcomp.so; default: search"},
		&cli.StringFlag{Name: "gpu-mem-limit", Value: "0", Usage: "device memory a GPU backend may use; 0 = its default"},
		&cli.DurationFlag{Name: "coalesce-wait", Value: daemon.Defaults().CoalesceWait, Usage: "how long a small batch may wait to travel with others to a GPU; 0 = never"},
		&cli.DurationFlag{Name: "poll-wait", Value: daemon.Defaults().PollWait, Usage: "how long a connection polls for its next request before sleeping (lower latency for a client that sends small requests back to back, for CPU); 0 = never"},
		&cli.IntFlag{Name: "max-connections", Value: daemon.Defaults().MaxConns, Usage: "connections served at once"},
		&cli.IntFlag{Name: "max-connections-per-user", Usage: "connections one user may hold at once; 0 = a quarter of --max-connections"},
		&cli.StringFlag{Name: "io-budget", Value: "0", Usage: "memory for requests and replies in flight (K/M/G/T); 0 = 1/16 of RAM, 256M-4G"},
		&cli.StringFlag{Name: "user-io-budget", Value: "0", Usage: "the part of --io-budget one user may take; 0 = half"},
		&cli.IntFlag{Name: "max-batch-pages", Value: daemon.Defaults().MaxBatchPages, Usage: "keys in one request"},
		&cli.IntFlag{Name: "max-pools-per-user", Value: daemon.Defaults().PoolsPerUser, Usage: "pools one user may create; 0 = no limit"},
		&cli.StringFlag{Name: "user-quota", Value: "0", Usage: "compressed bytes one user may store (K/M/G/T); 0 = no limit"},
		&cli.DurationFlag{Name: "idle-timeout", Value: daemon.Defaults().IdleTimeout, Usage: "close a connection with no request for this long"},
		&cli.DurationFlag{Name: "frame-timeout", Value: daemon.Defaults().FrameTimeout, Usage: "a request must arrive whole within this once it starts"},
		&cli.StringFlag{Name: "metrics-listen", EnvVars: []string{"S4D_METRICS_LISTEN"}, Usage: "serve Prometheus metrics at /metrics on this Unix socket path or loopback host:port (no other address: the endpoint has no authentication); off by default"},
		&cli.StringFlag{Name: "log-level", Value: "info", EnvVars: []string{"S4D_LOG_LEVEL"}, Usage: "debug, info, warn or error"},
		// For profiling the request path; written when the daemon stops.
		&cli.StringFlag{Name: "cpuprofile", Hidden: true, Usage: "write a CPU profile to this file"},
		&cli.StringFlag{Name: "mutexprofile", Hidden: true, Usage: "write a profile of lock contention to this file on exit"},
		&cli.StringFlag{Name: "trace", Hidden: true, Usage: "write an execution trace (go tool trace) to this file"},
	},
	Action: run,
}

func run(cx *cli.Context) error {
	level := new(slog.LevelVar)
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	load := func() (daemon.Config, error) { return configure(cx) }
	cfg, err := load()
	if err != nil {
		return err
	}
	level.Set(cfg.LogLevel)
	cfg.Log, cfg.Level = log, level
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
	d, err := daemon.New(cfg)
	if err != nil {
		return err
	}
	if mln != nil {
		mctx, stopMetrics := context.WithCancel(context.Background())
		defer stopMetrics()
		info := buildinfo.Get()
		go metrics.Serve(mctx, mln, metrics.Handler(d, info.Version, info.Commit, log), log)
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
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	return d.Run(ctx, load)
}

// configure builds the configuration: defaults, then the config file, then
// the flags and environment variables that were set, which win.
func configure(cx *cli.Context) (daemon.Config, error) {
	cfg := daemon.Defaults()
	path, named := cx.String("config"), cx.IsSet("config")
	f, err := daemon.LoadFile(path, named)
	if err != nil {
		return cfg, err
	}
	if err := f.Apply(&cfg); err != nil {
		return cfg, fmt.Errorf("config %s: %w", path, err)
	}
	str := func(name string, dst *string) {
		if cx.IsSet(name) {
			*dst = cx.String(name)
		}
	}
	str("socket", &cfg.Socket)
	str("backend", &cfg.Backend)
	str("codec", &cfg.Codec)
	str("webgpu-lib", &cfg.WebGPULib)
	str("nvcomp-lib", &cfg.NvcompLib)
	str("metrics-listen", &cfg.MetricsListen)
	if cx.IsSet("socket-mode") {
		mode, err := strconv.ParseUint(cx.String("socket-mode"), 8, 32)
		if err != nil || mode > 0o777 {
			return cfg, fmt.Errorf("--socket-mode %q: want octal permissions like 0660", cx.String("socket-mode"))
		}
		cfg.SocketMode = uint32(mode)
	}
	if cx.IsSet("mem-limit") {
		if cfg.MemLimit, err = daemon.ParseSize(cx.String("mem-limit")); err != nil {
			return cfg, fmt.Errorf("--mem-limit: %w", err)
		}
	}
	if cx.IsSet("gpu-mem-limit") {
		gl, err := daemon.ParseSize(cx.String("gpu-mem-limit"))
		if err != nil {
			return cfg, fmt.Errorf("--gpu-mem-limit: %w", err)
		}
		cfg.GPUMemLimit = int64(gl)
	}
	if cx.IsSet("log-level") {
		if err := cfg.LogLevel.UnmarshalText([]byte(cx.String("log-level"))); err != nil {
			return cfg, fmt.Errorf("--log-level: %w", err)
		}
	}
	if cx.IsSet("page-size") {
		cfg.PageSize = cx.Int("page-size")
	}
	if cx.IsSet("workers") {
		cfg.Workers = cx.Int("workers")
	}
	if cx.IsSet("coalesce-wait") {
		cfg.CoalesceWait = cx.Duration("coalesce-wait")
	}
	if cx.IsSet("poll-wait") {
		cfg.PollWait = cx.Duration("poll-wait")
	}
	if cx.IsSet("max-connections") {
		cfg.MaxConns = cx.Int("max-connections")
	}
	if cx.IsSet("max-connections-per-user") {
		cfg.MaxConnsPerUser = cx.Int("max-connections-per-user")
	}
	for _, b := range []struct {
		flag string
		to   *int64
	}{{"io-budget", &cfg.IOBudget}, {"user-io-budget", &cfg.UserIOBudget}} {
		if cx.IsSet(b.flag) {
			v, err := daemon.ParseSize(cx.String(b.flag))
			if err != nil {
				return cfg, fmt.Errorf("--%s: %w", b.flag, err)
			}
			*b.to = int64(v)
		}
	}
	if cx.IsSet("max-batch-pages") {
		cfg.MaxBatchPages = cx.Int("max-batch-pages")
	}
	if cx.IsSet("max-pools-per-user") {
		cfg.PoolsPerUser = cx.Int("max-pools-per-user")
	}
	if cx.IsSet("user-quota") {
		if cfg.UserQuota, err = daemon.ParseSize(cx.String("user-quota")); err != nil {
			return cfg, fmt.Errorf("--user-quota: %w", err)
		}
	}
	if cx.IsSet("idle-timeout") {
		cfg.IdleTimeout = cx.Duration("idle-timeout")
	}
	if cx.IsSet("frame-timeout") {
		cfg.FrameTimeout = cx.Duration("frame-timeout")
	}
	if cfg.MetricsListen != "" {
		if _, _, err := metrics.CheckAddress(cfg.MetricsListen); err != nil {
			return cfg, err
		}
	}
	return cfg, cfg.Validate()
}
