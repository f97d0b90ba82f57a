package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/s4d-project/s4d/settings/bytesize"
)

// Latency summarises request round trips, in microseconds.
type Latency struct {
	P50  float64 `json:"p50_us"`
	P99  float64 `json:"p99_us"`
	P999 float64 `json:"p999_us"`
}

// percentile returns the nearest-rank p-th percentile (0 < p <= 100) of
// sorted: the smallest sample that at least p% of the samples do not
// exceed. Nearest rank never invents a value between two samples, so a
// p99 is a latency some request really had.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	// The small tolerance keeps 99.9% of 1000 at rank 999, not 1000, despite
	// floating-point rounding.
	rank := int(math.Ceil(p/100*float64(len(sorted)) - 1e-9))
	return sorted[min(max(rank, 1), len(sorted))-1]
}

// summarise sorts samples in place and reads off p50, p99 and p99.9.
func summarise(samples []time.Duration) Latency {
	slices.Sort(samples)
	us := func(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
	return Latency{
		P50:  us(percentile(samples, 50)),
		P99:  us(percentile(samples, 99)),
		P999: us(percentile(samples, 99.9)),
	}
}

// Figures are what one run measured. PUT is compression, GET decompression.
type Figures struct {
	PutGBps        float64 `json:"put_gb_per_s"`
	GetGBps        float64 `json:"get_gb_per_s"`
	PutPagesPerSec float64 `json:"put_pages_per_s"`
	GetPagesPerSec float64 `json:"get_pages_per_s"`
	Ratio          float64 `json:"ratio"`            // original bytes / stored bytes
	PutCPUPerGB    float64 `json:"put_cpu_s_per_gb"` // core-seconds per GB of pages
	GetCPUPerGB    float64 `json:"get_cpu_s_per_gb"`
}

// Result is one mode, backend, codec and batch size.
type Result struct {
	Mode        string  `json:"mode"`    // inproc or e2e
	Backend     string  `json:"backend"` // the engine, or "daemon" end to end
	Codec       string  `json:"codec"`
	Batch       int     `json:"batch_pages"`
	Clients     int     `json:"clients"`
	Pages       int     `json:"pages"`
	OrigBytes   int64   `json:"orig_bytes"`
	StoredBytes int64   `json:"stored_bytes"`
	PutSeconds  float64 `json:"put_seconds"`
	GetSeconds  float64 `json:"get_seconds"`
	Figures
	// ClientCPUPerGB is the bench process's own CPU end to end (the
	// daemon's is in Figures): what a client pays to talk to the daemon.
	ClientCPUPerGB float64 `json:"client_cpu_s_per_gb,omitempty"`
	PutLatency     Latency `json:"put_latency"`
	GetLatency     Latency `json:"get_latency"`
	// PutStages and GetStages break an engine's time down by stage
	// (upload, kernels, download, host), for engines that time them.
	PutStages []StageFigure `json:"put_stages,omitempty"`
	GetStages []StageFigure `json:"get_stages,omitempty"`
	// VsCPU is each figure divided by the cpu backend's, measured
	// in-process on the same pages with the same codec, batch and clients
	// in the same run. 0 where the reference figure is 0.
	VsCPU Figures `json:"vs_cpu_inproc"`
}

// finish derives the rates from the raw counts and times.
func (r *Result) finish(putCPU, getCPU float64) {
	gb := float64(r.OrigBytes) / 1e9
	r.PutGBps = div(gb, r.PutSeconds)
	r.GetGBps = div(gb, r.GetSeconds)
	r.PutPagesPerSec = div(float64(r.Pages), r.PutSeconds)
	r.GetPagesPerSec = div(float64(r.Pages), r.GetSeconds)
	r.Ratio = div(float64(r.OrigBytes), float64(r.StoredBytes))
	r.PutCPUPerGB = div(putCPU, gb)
	r.GetCPUPerGB = div(getCPU, gb)
}

// div is a/b, or 0 when b is 0: JSON has no NaN or infinity, and a
// missing figure prints as "-".
func div(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

// relative divides every figure of f by the same figure of ref.
func relative(f, ref Figures) Figures {
	return Figures{
		PutGBps:        div(f.PutGBps, ref.PutGBps),
		GetGBps:        div(f.GetGBps, ref.GetGBps),
		PutPagesPerSec: div(f.PutPagesPerSec, ref.PutPagesPerSec),
		GetPagesPerSec: div(f.GetPagesPerSec, ref.GetPagesPerSec),
		Ratio:          div(f.Ratio, ref.Ratio),
		PutCPUPerGB:    div(f.PutCPUPerGB, ref.PutCPUPerGB),
		GetCPUPerGB:    div(f.GetCPUPerGB, ref.GetCPUPerGB),
	}
}

// Report is everything one bench run prints.
type Report struct {
	Corpus    string      `json:"corpus"`
	PageSize  int         `json:"page_size"`
	Pages     int         `json:"pages"`
	Cores     int         `json:"cores"`
	Repeat    int         `json:"repeat"` // runs per case; the fastest is reported
	Daemon    *DaemonInfo `json:"daemon,omitempty"`
	Skipped   []Skipped   `json:"skipped,omitempty"`
	Results   []Result    `json:"results"`
	Reference []Result    `json:"cpu_inproc_reference"`
}

// DaemonInfo identifies the daemon measured end to end.
type DaemonInfo struct {
	Socket string `json:"socket"`
	PID    int    `json:"pid"`
	Server string `json:"server"`
	Codec  string `json:"codec"`
}

// Skipped is a backend that could not be measured here, and why.
type Skipped struct {
	Backend string `json:"backend"`
	State   string `json:"state"`
	Reason  string `json:"reason"`
}

func (r *Report) writeJSON(w io.Writer) error {
	e := json.NewEncoder(w)
	e.SetIndent("", "  ")
	return e.Encode(r)
}

// writeTable prints one line per result with each figure followed by its
// ratio to the cpu backend in-process, then the latencies.
func (r *Report) writeTable(w io.Writer) error {
	fmt.Fprintf(w, "corpus %s: %d pages of %d bytes (%s), %d cores\n", r.Corpus, r.Pages, r.PageSize,
		bytesize.Format(uint64(r.Pages)*uint64(r.PageSize)), r.Cores)
	if d := r.Daemon; d != nil {
		fmt.Fprintf(w, "daemon %s pid %d at %s, codec %s\n", d.Server, d.PID, d.Socket, d.Codec)
	}
	for _, s := range r.Skipped {
		fmt.Fprintf(w, "skipped %s: %s: %s\n", s.Backend, s.State, s.Reason)
	}
	if r.Repeat > 1 {
		fmt.Fprintf(w, "each case run %d times, alternating with its reference; the fastest run is shown\n", r.Repeat)
	}
	fmt.Fprintln(w, "figures in brackets: x cpu-inproc (the cpu backend in this process, same pages, codec, batch and clients)")
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "MODE\tBACKEND\tCODEC\tBATCH\tCLIENTS\tPUT GB/s\tGET GB/s\tPUT pages/s\tGET pages/s\tRATIO\tCPU s/GB PUT\tCPU s/GB GET\t")
	for _, x := range r.rows() {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", x.Mode, x.Backend, x.Codec, x.Batch, x.Clients,
			fig(x.PutGBps, x.VsCPU.PutGBps, 3), fig(x.GetGBps, x.VsCPU.GetGBps, 3),
			fig(x.PutPagesPerSec, x.VsCPU.PutPagesPerSec, 0), fig(x.GetPagesPerSec, x.VsCPU.GetPagesPerSec, 0),
			fig(x.Ratio, x.VsCPU.Ratio, 2), fig(x.PutCPUPerGB, x.VsCPU.PutCPUPerGB, 3), fig(x.GetCPUPerGB, x.VsCPU.GetCPUPerGB, 3))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "MODE\tBACKEND\tCODEC\tBATCH\tCLIENTS\tPUT p50 us\tp99\tp99.9\tGET p50 us\tp99\tp99.9\t")
	for _, x := range r.rows() {
		p, g := x.PutLatency, x.GetLatency
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%.1f\t%.1f\t%.1f\t%.1f\t%.1f\t%.1f\t\n", x.Mode, x.Backend, x.Codec, x.Batch, x.Clients,
			p.P50, p.P99, p.P999, g.P50, g.P99, g.P999)
	}
	return tw.Flush()
}

// rows is what the table shows: the results, and end to end also the
// in-process reference itself, so its absolute figures are on the page too.
// In-process, the cpu engine's results already are the reference.
func (r *Report) rows() []Result {
	if r.Daemon == nil {
		return r.Results
	}
	return append(append([]Result(nil), r.Results...), r.Reference...)
}

// fig prints a figure and its ratio to the reference.
func fig(v, rel float64, prec int) string {
	if v == 0 {
		return "-"
	}
	s := fmt.Sprintf("%.*f", prec, v)
	if rel == 0 {
		return s + " (-)"
	}
	return fmt.Sprintf("%s (%.2fx)", s, rel)
}
