package vk

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"
)

// TestConcurrentSubmit: 16 goroutines at once each copy their own pages
// to the device and, after that copy, back into another host buffer, many
// times over, more submissions than a ring has buffers. Every round trip
// must come back byte for byte (a batch submitted by another caller keeps
// each buffer's dependency and signals its value), every submission is
// counted once, and combining makes no more calls than submissions. Both
// ways: combined, and S4D_VULKAN_SUBMIT=serial.
func TestConcurrentSubmit(t *testing.T) {
	for _, mode := range []string{"combined", "serial"} {
		t.Run(mode, func(t *testing.T) {
			if mode == "serial" {
				t.Setenv("S4D_VULKAN_SUBMIT", "serial")
			}
			d := open(t)
			if !d.Info().HostImport {
				t.Skip("no VK_EXT_external_memory_host")
			}
			const callers, rounds, each = 16, 40, 64 << 10
			src, up := hostMem(t, d, callers*each)
			dst, down := hostMem(t, d, callers*each)
			dev := devMem(t, d, callers*each)
			var wg sync.WaitGroup
			errs := make(chan error, callers)
			for g := range callers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					lo := int64(g * each)
					mine, back := src[lo:lo+each], dst[lo:lo+each]
					for r := range rounds {
						for i := range mine {
							mine[i] = byte(i*31 + g*7 + r*13)
						}
						t1, err := d.Copy(dev, up, []Region{{lo, lo, each}}, Ticket{})
						if err != nil {
							errs <- err
							return
						}
						t2, err := d.Copy(down, dev, []Region{{lo, lo, each}}, t1)
						if err == nil {
							err = d.Wait(t2, time.Minute)
						}
						if err != nil {
							errs <- err
							return
						}
						if !bytes.Equal(back, mine) {
							errs <- fmt.Errorf("caller %d round %d: the pages came back changed", g, r)
							return
						}
					}
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
			s := d.SubmitStats()
			if s.N != 2*callers*rounds || s.Calls < 1 || s.Calls > s.N {
				t.Fatalf("stats %+v, want %d submissions in at most as many calls", s, 2*callers*rounds)
			}
			for i, c := range s.Slow {
				if c < 0 || c > s.Calls || (i > 0 && c > s.Slow[i-1]) {
					t.Fatalf("slow calls %v out of order for %d calls", s.Slow, s.Calls)
				}
			}
			if mode == "serial" && s.Calls != s.N {
				t.Fatalf("serial: %d calls for %d submissions", s.Calls, s.N)
			}
			t.Logf("%s: %d submissions in %d calls, %v waiting for a queue, %v in the driver", mode, s.N, s.Calls, s.Lock, s.Call)
		})
	}
}

// BenchmarkSubmit is what a submission costs with many callers: each op
// is one small copy (a page, host to device memory) submitted and waited
// for, by 1 or 16 callers at once, combined and serial (one lock around
// recording and submitting, as before). S4D_BENCH_IMPORTS=n imports n
// more 16 MiB host buffers first (whether the driver's cost grows with
// the memory it knows). Reports µs of the driver and of waiting for the
// queue per submission, and submissions per vkQueueSubmit.
func BenchmarkSubmit(b *testing.B) {
	imports, _ := strconv.Atoi(os.Getenv("S4D_BENCH_IMPORTS"))
	for _, mode := range []string{"combined", "serial"} {
		for _, callers := range []int{1, 16} {
			b.Run(fmt.Sprintf("%s/callers=%d", mode, callers), func(b *testing.B) {
				if mode == "serial" {
					b.Setenv("S4D_VULKAN_SUBMIT", "serial")
				}
				d, err := Open(Options{Device: -1})
				if err != nil {
					b.Skip(err)
				}
				b.Cleanup(d.Close)
				for range imports {
					hostMem(b, d, 16<<20)
				}
				_, up := hostMem(b, d, callers*4096)
				dev := devMem(b, d, callers*4096)
				s0 := d.SubmitStats()
				b.ResetTimer()
				var wg sync.WaitGroup
				per := (b.N + callers - 1) / callers
				for g := range callers {
					wg.Add(1)
					go func() {
						defer wg.Done()
						lo := int64(g * 4096)
						for range per {
							t, err := d.Copy(dev, up, []Region{{lo, lo, 4096}}, Ticket{})
							if err == nil {
								err = d.Wait(t, time.Minute)
							}
							if err != nil {
								b.Error(err)
								return
							}
						}
					}()
				}
				wg.Wait()
				b.StopTimer()
				s := d.SubmitStats()
				n := float64(s.N - s0.N)
				b.ReportMetric(float64(s.Call-s0.Call)/1e3/n, "call-µs/sub")
				b.ReportMetric(float64(s.Lock-s0.Lock)/1e3/n, "lock-µs/sub")
				b.ReportMetric(n/float64(s.Calls-s0.Calls), "subs/call")
			})
		}
	}
}
