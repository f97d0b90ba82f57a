// Package runcmd is `s4d run`: an unmodified program whose large heap
// allocations become s4d regions, through a preloaded library
// (clients/preload/s4d_run.c, installed beside the binary as libs4d-run.so).
package runcmd

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"
	"golang.org/x/sys/unix"

	"github.com/s4d-project/s4d/client"
	"github.com/s4d-project/s4d/cmd/s4d/exitcode"
	"github.com/s4d-project/s4d/ipc"
	"github.com/s4d-project/s4d/settings/bytesize"
)

// Library is the preload library's file name.
const Library = "libs4d-run.so"

// Command is `s4d run`.
var Command = &cli.Command{
	Name:      "run",
	Usage:     "run a program whose large allocations live in s4d regions (cold pages compressed)",
	ArgsUsage: "-- CMD [ARGS...]",
	Description: "Preloads " + Library + ", which turns every heap allocation of at least --min-size bytes\n" +
		"(malloc, calloc, realloc, posix_memalign: glibc's large chunks, NumPy and PyTorch CPU tensors)\n" +
		"into a region of the daemon at --socket, keeping at most --resident bytes of them resident.\n" +
		"If the daemon dies the program is stopped (exit status 70) rather than handed zeros. A child of\n" +
		"fork has no mapping of its parent's regions (touching one faults); fork+exec is unaffected.",
	Flags: []cli.Flag{
		&cli.StringFlag{Name: "resident", Usage: "bytes of all regions together that may stay resident (K/M/G suffixes); unset, a quarter of each region"},
		&cli.StringFlag{Name: "min-size", Value: "64M", Usage: "allocations of at least this many bytes become regions"},
		&cli.BoolFlag{Name: "dry-run", Usage: "run the program without regions, printing each allocation that would have been one"},
		&cli.StringFlag{Name: "socket", EnvVars: []string{"S4D_SOCKET"}, Value: ipc.DefaultSocketPath, Usage: "daemon socket"},
		&cli.StringFlag{Name: "library", Usage: "the preload library (default: " + Library + " beside the s4d binary, or in ../lib/s4d)"},
	},
	Action: run,
}

func run(cx *cli.Context) error {
	args := cx.Args().Slice()
	if len(args) == 0 {
		return exitcode.UsageErr(errors.New("s4d run: no command given (s4d run [flags] -- CMD ARGS...)"))
	}
	minSize, err := bytesize.Parse(cx.String("min-size"))
	if err != nil || minSize == 0 {
		return exitcode.UsageErr(fmt.Errorf("--min-size %q: want a size such as 64M", cx.String("min-size")))
	}
	var resident uint64
	if s := cx.String("resident"); s != "" {
		if resident, err = bytesize.Parse(s); err != nil {
			return exitcode.UsageErr(fmt.Errorf("--resident %q: want a size such as 128M", s))
		}
	}
	lib, err := findLibrary(cx.String("library"))
	if err != nil {
		return err
	}
	sock := cx.String("socket")
	if !cx.Bool("dry-run") {
		if err := preflight(sock); err != nil {
			return err
		}
	}
	path, err := exec.LookPath(args[0])
	if err != nil {
		return fmt.Errorf("s4d run: %w", err)
	}
	env := os.Environ()
	preload := lib
	if old := os.Getenv("LD_PRELOAD"); old != "" {
		preload += ":" + old
	}
	env = setEnv(env, "LD_PRELOAD", preload)
	env = setEnv(env, "S4D_SOCKET", sock)
	env = setEnv(env, "S4D_RUN_MIN_SIZE", fmt.Sprint(minSize))
	if resident > 0 {
		env = setEnv(env, "S4D_RUN_RESIDENT", fmt.Sprint(resident))
	}
	if cx.Bool("dry-run") {
		env = setEnv(env, "S4D_RUN_DRY", "1")
	}
	// The program takes this process's place: its exit status is s4d's.
	err = syscall.Exec(path, args, env)
	return fmt.Errorf("s4d run: starting %s: %w", args[0], err)
}

// findLibrary returns the preload library's path.
func findLibrary(flag string) (string, error) {
	if flag != "" {
		if _, err := os.Stat(flag); err != nil {
			return "", fmt.Errorf("s4d run: --library: %w", err)
		}
		return filepath.Abs(flag)
	}
	exe, err := os.Executable()
	if err == nil {
		exe, _ = filepath.EvalSymlinks(exe)
		dir := filepath.Dir(exe)
		for _, p := range []string{filepath.Join(dir, Library), filepath.Join(dir, "..", "lib", "s4d", Library)} {
			if _, err := os.Stat(p); err == nil {
				return filepath.Clean(p), nil
			}
		}
	}
	return "", fmt.Errorf("s4d run: %s not found beside %s or in ../lib/s4d (build it with make, or give --library)", Library, exe)
}

// preflight says clearly, before the program starts, why regions would
// fail: the library itself can only fall back to ordinary memory.
func preflight(sock string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c := &client.Client{Socket: sock}
	defer c.Close()
	h, err := c.Hello(ctx)
	if err != nil {
		return fmt.Errorf("s4d run: %w", err)
	}
	if int(h.PageSize) != os.Getpagesize() {
		return fmt.Errorf("s4d run: the daemon stores %d-byte pages; regions need the system's %d", h.PageSize, os.Getpagesize())
	}
	if fd, err := unix.Open("/dev/userfaultfd", unix.O_RDWR|unix.O_CLOEXEC, 0); err == nil {
		unix.Close(fd)
	} else if b, _ := os.ReadFile("/proc/sys/vm/unprivileged_userfaultfd"); os.Geteuid() != 0 && strings.TrimSpace(string(b)) != "1" {
		return fmt.Errorf("s4d run: this user may not create userfaultfds (/dev/userfaultfd: %v): give it access to /dev/userfaultfd, or set vm.unprivileged_userfaultfd=1", err)
	}
	return nil
}

func setEnv(env []string, k, v string) []string {
	out := env[:0]
	for _, e := range env {
		if !strings.HasPrefix(e, k+"=") {
			out = append(out, e)
		}
	}
	return append(out, k+"="+v)
}
