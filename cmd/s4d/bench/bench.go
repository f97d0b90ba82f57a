// Package bench is `s4d bench`: it measures compression speed, ratio, CPU
// cost and latency, either of the engines in this process or of a running
// daemon end to end, always next to the cpu engine in this process on the
// same pages, so that figures taken on different or busy machines compare.
package bench

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/s4d-project/s4d/backends"
	_ "github.com/s4d-project/s4d/backends/all"
	"github.com/s4d-project/s4d/ipc"
	"github.com/s4d-project/s4d/pagefmt"
)

// Command is `s4d bench`.
var Command = &cli.Command{
	Name:  "bench",
	Usage: "measure throughput, ratio, CPU cost and latency, in-process or through a running daemon",
	Description: "Without --inproc, drives the daemon at --socket: PUTs every page, GETs it back and compares, then deletes it.\n" +
		"With --inproc, runs the compression engines in this process. Either way the cpu engine is also run\n" +
		"in this process on the same pages, and every figure is printed with its ratio to it (x cpu-inproc).",
	Flags: []cli.Flag{
		&cli.BoolFlag{Name: "inproc", Usage: "run the engines in this process instead of through a daemon"},
		&cli.BoolFlag{Name: "store", Usage: "with --inproc: engines that pin memory (cuda) work as in the daemon: pages in registered memory, compressed straight into a store and read back from it"},
		&cli.StringFlag{Name: "backend", Value: "all", Usage: "with --inproc: cpu, webgpu, cuda or all"},
		&cli.StringFlag{Name: "codec", Value: "both", Usage: "with --inproc: lz4, zstd or both (end to end, the daemon's codec is used)"},
		&cli.StringFlag{Name: "socket", EnvVars: []string{"S4D_SOCKET"}, Value: ipc.DefaultSocketPath, Usage: "daemon socket"},
		&cli.IntFlag{Name: "clients", Value: 1, Usage: "concurrent clients (connections end to end, goroutines in-process)"},
		&cli.StringFlag{Name: "batch", Value: "256", Usage: "pages per request; a list such as 1,16,256,4096 sweeps them"},
		&cli.IntFlag{Name: "from-pid", Usage: "corpus: a snapshot of this process's writable private memory"},
		&cli.StringFlag{Name: "file", Usage: "corpus: the whole pages of this file"},
		&cli.StringFlag{Name: "synthetic", Value: "mixed", Usage: "corpus kind when neither --from-pid nor --file: zero, same, text, pointers, random, threshold or mixed"},
		&cli.StringFlag{Name: "size", Value: "64M", Usage: "size of a synthetic corpus (K/M/G suffixes)"},
		&cli.StringFlag{Name: "max-bytes", Value: "256M", Usage: "at most this much of --from-pid or --file"},
		&cli.IntFlag{Name: "page-size", Value: 4096, Usage: "with --inproc: page size (end to end, the daemon's is used)"},
		&cli.IntFlag{Name: "repeat", Value: 1, Usage: "measure each case this many times and keep the fastest (steadier figures on a busy machine)"},
		&cli.BoolFlag{Name: "json", Usage: "print the report as JSON"},
		&cli.BoolFlag{Name: "memfd", Usage: "end to end: hand pages over in a sealed memfd (PUT_FD/GET_FD) instead of through the socket"},
		&cli.DurationFlag{Name: "poll-wait", Usage: "end to end: how long a lone small request polls for its answer before sleeping (0: the client's default; negative: never)"},
		&cli.StringFlag{Name: "plot", Usage: "draw throughput against batch size into this PNG file"},
		&cli.BoolFlag{Name: "vs-zram", Usage: "also write the pages through a fresh kernel zram device (lz4, O_DIRECT I/Os of one batch, one thread per client), read them back and report it beside the rest; needs root, removes the device after"},
	},
	Action: run,
}

// parseBatches reads "1,16,256" into ascending, distinct batch sizes.
func parseBatches(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("--batch %q: want page counts of at least 1, separated by commas", s)
		}
		out = append(out, n)
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

func parseCodecs(s string) ([]pagefmt.Codec, error) {
	if s == "both" {
		return []pagefmt.Codec{pagefmt.CodecLZ4, pagefmt.CodecZstd}, nil
	}
	c, err := pagefmt.ParseCodec(s)
	if err != nil {
		return nil, fmt.Errorf("--codec: %w (or both)", err)
	}
	return []pagefmt.Codec{c}, nil
}

// loadCorpus reads the pages to measure and says what they are.
func loadCorpus(cx *cli.Context, pageSize int) ([]byte, string, error) {
	maxBytes, err := parseSize(cx.String("max-bytes"))
	if err != nil {
		return nil, "", fmt.Errorf("--max-bytes: %w", err)
	}
	switch pid, file := cx.Int("from-pid"), cx.String("file"); {
	case pid != 0 && file != "":
		return nil, "", errors.New("--from-pid and --file: give one corpus")
	case pid != 0:
		p, err := snapshotPID(pid, pageSize, maxBytes)
		comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
		return p, fmt.Sprintf("pid %d (%s)", pid, strings.TrimSpace(string(comm))), err
	case file != "":
		p, err := readFilePages(file, pageSize, maxBytes)
		return p, "file " + file, err
	}
	size, err := parseSize(cx.String("size"))
	if err != nil {
		return nil, "", fmt.Errorf("--size: %w", err)
	}
	kind := cx.String("synthetic")
	p, err := syntheticPages(kind, pageSize, size)
	return p, "synthetic " + kind, err
}

// documented are the engines s4d knows of; one left out of this build
// is reported as skipped rather than as a typing error.
var documented = []string{"cpu", "webgpu", "cuda"}

// faster keeps whichever of best and r took the least wall time for PUT
// and GET together (r alone when first): outside load only ever slows a
// run down, so the fastest run is the one it disturbed least.
func faster(best, r Result, first bool) Result {
	if first || r.PutSeconds+r.GetSeconds < best.PutSeconds+best.GetSeconds {
		return r
	}
	return best
}

func run(cx *cli.Context) error {
	ctx := cx.Context
	batches, err := parseBatches(cx.String("batch"))
	if err != nil {
		return err
	}
	clients, repeat := cx.Int("clients"), cx.Int("repeat")
	if clients < 1 || repeat < 1 {
		return errors.New("--clients and --repeat must be at least 1")
	}
	inproc := cx.Bool("inproc")
	pageSize := cx.Int("page-size")
	rep := &Report{Cores: runtime.GOMAXPROCS(0), Repeat: repeat}

	var target *daemonTarget
	if !inproc {
		if cx.IsSet("codec") || cx.IsSet("backend") || cx.IsSet("page-size") {
			return errors.New("--codec, --backend and --page-size apply to --inproc only; end to end the daemon's own are measured")
		}
		if target, err = openDaemon(ctx, cx.String("socket"), clients, cx.Duration("poll-wait")); err != nil {
			return err
		}
		defer target.close()
		target.memfd = cx.Bool("memfd")
		pageSize = int(target.hello.PageSize)
		rep.Daemon = &DaemonInfo{Socket: target.socket, PID: target.pid, Server: target.hello.Server, Codec: target.hello.Codec}
		for _, b := range batches {
			if b > target.maxBatch() {
				return fmt.Errorf("--batch %d: the daemon takes at most %d pages per request", b, target.maxBatch())
			}
		}
	}
	pages, desc, err := loadCorpus(cx, pageSize)
	if err != nil {
		return err
	}
	rep.Corpus, rep.PageSize, rep.Pages = desc, pageSize, len(pages)/pageSize

	var prog *progress
	if isTerminal(os.Stderr.Fd()) {
		prog = newProgress(os.Stderr)
	} else {
		prog = newProgress(nil)
	}
	defer prog.end()

	// Open the engines: for the reference, cpu always; in-process, also
	// those asked for.
	names := []string{"cpu"}
	if inproc {
		switch b := cx.String("backend"); b {
		case "all":
			names = backends.Names()
		default:
			if !slices.Contains(backends.Names(), b) && !slices.Contains(documented, b) {
				return fmt.Errorf("--backend %q: want all or one of %s", b, strings.Join(backends.Names(), ", "))
			}
			if !slices.Contains(backends.Names(), b) {
				rep.Skipped = append(rep.Skipped, Skipped{Backend: b, State: string(backends.StateUnavailable),
					Reason: "not built into this binary (built in: " + strings.Join(backends.Names(), ", ") + ")"})
			} else if b != "cpu" {
				names = append(names, b)
			}
		}
	}
	set := backends.Open(backends.FromEnv(backends.Options{PageSize: pageSize}), names...)
	defer set.Close()
	for _, s := range set.Statuses() {
		if s.State != backends.StateOK {
			rep.Skipped = append(rep.Skipped, Skipped{Backend: s.Name, State: string(s.State), Reason: s.Reason})
		}
	}
	cpu, ok := set.Get("cpu")
	if !ok {
		return errors.New("the cpu backend did not open; nothing to compare against")
	}

	// measure runs one case next to the cpu engine in-process on the same
	// pages, alternating the two `repeat` times so that both meet the same
	// spells of outside load, and keeps the fastest of each. A nil run means
	// the case is the cpu engine in-process itself: its own reference.
	measure := func(codec pagefmt.Codec, batch int, run func() (Result, error)) error {
		var ref, r Result
		for i := range repeat {
			a, err := runInproc(ctx, cpu, codec, pages, pageSize, batch, clients, prog)
			if err != nil {
				return err
			}
			ref = faster(ref, a, i == 0)
			if run == nil {
				continue
			}
			b, err := run()
			if err != nil {
				return err
			}
			r = faster(r, b, i == 0)
		}
		ref.VsCPU = relative(ref.Figures, ref.Figures)
		rep.Reference = append(rep.Reference, ref)
		if run == nil {
			r = ref
		} else {
			r.VsCPU = relative(r.Figures, ref.Figures)
		}
		rep.Results = append(rep.Results, r)
		return nil
	}

	if inproc {
		codecs, err := parseCodecs(cx.String("codec"))
		if err != nil {
			return err
		}
		for _, b := range set.Usable() {
			if cx.String("backend") != "all" && b.Name() != cx.String("backend") {
				continue // opened only as the reference
			}
			for _, codec := range codecs {
				for _, batch := range batches {
					var run func() (Result, error)
					if b.Name() != "cpu" {
						run = func() (Result, error) { return runInproc(ctx, b, codec, pages, pageSize, batch, clients, prog) }
						if _, ok := b.(backends.Pinner); ok && cx.Bool("store") {
							run = func() (Result, error) { return runStored(ctx, b, codec, pages, pageSize, batch, clients, prog) }
						}
					}
					if err := measure(codec, batch, run); err != nil {
						return err
					}
				}
			}
		}
	} else {
		codec, err := pagefmt.ParseCodec(target.hello.Codec)
		if err != nil {
			return fmt.Errorf("daemon announced codec: %w", err)
		}
		for _, batch := range batches {
			if err := measure(codec, batch, func() (Result, error) { return target.run(ctx, pages, batch, prog) }); err != nil {
				return err
			}
		}
	}
	if cx.Bool("vs-zram") {
		// zram in I/Os of each batch size, on as many threads as there are
		// clients: the same work in the same pieces as s4d's.
		for _, batch := range batches {
			if err := measure(pagefmt.CodecLZ4, batch, func() (Result, error) { return MeasureZram(pages, pageSize, batch, clients) }); err != nil {
				return err
			}
		}
	}
	prog.end() // before printing, so the report does not share a line with it

	if f := cx.String("plot"); f != "" {
		if err := writePlot(f, rep); err != nil {
			return fmt.Errorf("--plot: %w", err)
		}
	}
	if cx.Bool("json") {
		return rep.writeJSON(cx.App.Writer)
	}
	return rep.writeTable(cx.App.Writer)
}
