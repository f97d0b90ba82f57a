package tests

import (
	"bytes"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/s4d-project/s4d/backends/corpus"
	"github.com/s4d-project/s4d/ipc"
	"github.com/s4d-project/s4d/remote"
)

// daemonCPU is the daemon's user+system CPU time so far (/proc, in clock
// ticks of 10 ms).
func daemonCPU(tb testing.TB, d *daemon) time.Duration {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(d.cmd.Process.Pid) + "/stat")
	if err != nil {
		tb.Fatal(err)
	}
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+2:]))
	u, _ := strconv.ParseUint(f[11], 10, 64)
	s, _ := strconv.ParseUint(f[12], 10, 64)
	return time.Duration(u+s) * 10 * time.Millisecond
}

// The same 48 MiB of "mixed" pages through a 4 MiB memory limit, cold
// pages on the backing file alone (64 MiB) or on an 8 MiB file with the
// rest in the cluster (the loopback 3+3 test cluster): PUT and GET
// throughput, the daemon's CPU per GB moved, and the latency of GETs of
// one page at random keys (off RAM: on the file, or mostly in the
// cluster).
func BenchmarkRemoteColdTier(b *testing.B) {
	vc := valkeyCluster(b)
	key := bytes.Repeat([]byte{0x44}, remote.KeySize)
	pages := corpus.Pages(corpus.Mixed, (48<<20)/4096, 4096, 31)
	n := len(pages) / 4096
	for _, mode := range []string{"file", "remote"} {
		b.Run(mode, func(b *testing.B) {
			var args []string
			if mode == "file" {
				args = []string{"--mem-limit", "4M", "--backing-file", backingFile(b, 64<<20)}
			} else {
				args = append([]string{"--mem-limit", "4M", "--backing-file", backingFile(b, 8<<20)},
					remoteArgs(b, vc, key, "bench-"+strconv.Itoa(rand.IntN(1<<30)))...)
			}
			var put, get, cpu time.Duration
			var lat []time.Duration
			runs := 0
			for b.Loop() {
				d := start(b, args...)
				c0 := daemonCPU(b, d)
				put += putParallel(b, d, "p", pages, 2)
				get += checkPages(b, d, "p", pages)
				cpu += daemonCPU(b, d) - c0
				cl := d.client()
				for range 300 {
					k := uint64(rand.IntN(n))
					t0 := time.Now()
					_, codes, err := cl.Get(ctx(b), "p", []uint64{k})
					lat = append(lat, time.Since(t0))
					if err != nil || codes[0] != ipc.OK {
						b.Fatalf("get %d: %v %v", k, err, codes)
					}
				}
				if mode == "remote" {
					if st := statsOf(b, d); st.Remote.Pages == 0 {
						b.Fatalf("nothing went to the cluster: %+v", st.Remote)
					}
				}
				d.cmd.Process.Kill()
				runs++
			}
			mb := float64(runs*len(pages)) / 1e6
			b.ReportMetric(mb/put.Seconds(), "put-MB/s")
			b.ReportMetric(mb/get.Seconds(), "get-MB/s")
			b.ReportMetric(cpu.Seconds()/(2*mb/1e3), "cpu-s/GB")
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "get1-p50-us")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "get1-p99-us")
		})
	}
}
