// Package daemoncmd is `s4d daemon`.
package daemoncmd

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"syscall"

	"github.com/urfave/cli/v2"

	_ "github.com/s4d-project/s4d/backends/all"
	"github.com/s4d-project/s4d/daemon"
	"github.com/s4d-project/s4d/ipc"
)

// Command runs the daemon in the foreground.
var Command = &cli.Command{
	Name:  "daemon",
	Usage: "serve the page store on a Unix socket",
	Flags: []cli.Flag{
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
		&cli.DurationFlag{Name: "idle-timeout", Value: daemon.Defaults().IdleTimeout, Usage: "close a connection with no request for this long"},
		&cli.DurationFlag{Name: "frame-timeout", Value: daemon.Defaults().FrameTimeout, Usage: "a request must arrive whole within this once it starts"},
		&cli.StringFlag{Name: "log-level", Value: "info", EnvVars: []string{"S4D_LOG_LEVEL"}, Usage: "debug, info, warn or error"},
	},
	Action: run,
}

func run(cx *cli.Context) error {
	var level slog.Level
	if err := level.UnmarshalText([]byte(cx.String("log-level"))); err != nil {
		return fmt.Errorf("--log-level: %w", err)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	cfg := daemon.Defaults()
	cfg.Log = log
	cfg.Socket = cx.String("socket")
	mode, err := strconv.ParseUint(cx.String("socket-mode"), 8, 32)
	if err != nil || mode > 0o777 {
		return fmt.Errorf("--socket-mode %q: want octal permissions like 0660", cx.String("socket-mode"))
	}
	cfg.SocketMode = uint32(mode)
	if cfg.MemLimit, err = daemon.ParseSize(cx.String("mem-limit")); err != nil {
		return fmt.Errorf("--mem-limit: %w", err)
	}
	gl, err := daemon.ParseSize(cx.String("gpu-mem-limit"))
	if err != nil {
		return fmt.Errorf("--gpu-mem-limit: %w", err)
	}
	cfg.GPUMemLimit = int64(gl)
	cfg.Backend = cx.String("backend")
	cfg.Codec = cx.String("codec")
	cfg.PageSize = cx.Int("page-size")
	cfg.Workers = cx.Int("workers")
	cfg.WebGPULib = cx.String("webgpu-lib")
	cfg.NvcompLib = cx.String("nvcomp-lib")
	cfg.IdleTimeout = cx.Duration("idle-timeout")
	cfg.FrameTimeout = cx.Duration("frame-timeout")

	d, err := daemon.New(cfg)
	if err != nil {
		return err
	}
	if err := d.Listen(); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	return d.Serve(ctx)
}
