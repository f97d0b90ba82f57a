package daemon

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/s4d-project/s4d/backends/corpus"
	"github.com/s4d-project/s4d/client"
)

// TestRegionMeasure measures a region against the kernel's zram on the
// same pages: the latency of bringing back one page (a fault here, a 4 KiB
// O_DIRECT read there) and the speed of a scan. It runs only when asked
// (S4D_MEASURE=1), against the daemon at $S4D_SOCKET if set (a daemon of
// its own process is the realistic case) or one in this process.
//
//	S4D_MEASURE=1 S4D_SOCKET=/tmp/s.sock go test ./daemon -run TestRegionMeasure -v
func TestRegionMeasure(t *testing.T) {
	if os.Getenv("S4D_MEASURE") == "" {
		t.Skip("set S4D_MEASURE=1")
	}
	needUffd(t)
	var c *client.Client
	if s := os.Getenv("S4D_SOCKET"); s != "" {
		c = &client.Client{Socket: s}
	} else {
		c = serveInProcess(t, "cpu")
	}
	ctx := context.Background()
	const size = 64 << 20
	const samples = 4000
	ps := os.Getpagesize()
	pages := corpus.Pages(corpus.Mixed, size/ps, ps, 1)
	order := rand.New(rand.NewPCG(1, 2)).Perm(size / ps)[:samples]

	m, err := c.Map(ctx, size, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	mem := m.Bytes()
	copy(mem, pages)
	evictAll := func() {
		m.SetBudget(ctx, 0)
		waitUntil(t, "everything evicted", func() bool { return regionOf(t, c, m.ID()).Resident == 0 })
		m.SetBudget(ctx, size) // no eviction while measuring
	}
	evictAll()
	rs := regionOf(t, c, m.ID())
	t.Logf("region: %d MiB evicted into %d KiB (ratio %.2f)", rs.Evicted>>20, rs.Stored>>10, rs.Ratio)
	lat := make([]time.Duration, 0, samples)
	var sink byte
	for _, i := range order {
		t0 := time.Now()
		sink += mem[i*ps+ps/2]
		lat = append(lat, time.Since(t0))
	}
	rs = regionOf(t, c, m.ID())
	p50, p99 := quantiles(lat)
	report := fmt.Sprintf("region fault-in of one page: p50 %v p99 %v (daemon side p50 %.1f us p99 %.1f us)\n", p50, p99, rs.FaultP50, rs.FaultP99)
	evictAll()
	t0 := time.Now()
	var sum uint64
	for o := 0; o < size; o += 8 {
		sum += *(*uint64)(unsafe.Pointer(&mem[o]))
	}
	scan := time.Since(t0)
	report += fmt.Sprintf("region scan of %d MiB evicted: %v, %.2f GB/s\n", size>>20, scan, float64(size)/scan.Seconds()/1e9)
	for o := 0; o < size; o += ps {
		if string(mem[o:o+ps]) != string(pages[o:o+ps]) {
			t.Fatalf("page %d differs after the scan", o/ps)
		}
	}
	report += zramMeasure(t, pages, order)
	t.Log("\n" + report + fmt.Sprint(sink, sum&1))
}

func quantiles(d []time.Duration) (p50, p99 time.Duration) {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2], s[len(s)*99/100]
}

// zramMeasure stores pages on a fresh zram device (lz4, as zram users
// run it) and reads them back with O_DIRECT: single random pages, and a
// sequential scan. The device is reset and removed after; it is never
// used as swap.
func zramMeasure(t *testing.T, pages []byte, order []int) string {
	b, err := os.ReadFile("/sys/class/zram-control/hot_add")
	if err != nil {
		return fmt.Sprintf("zram: not available (%v)\n", err)
	}
	dev := strings.TrimSpace(string(b))
	sys := "/sys/block/zram" + dev + "/"
	defer func() {
		os.WriteFile(sys+"reset", []byte("1"), 0)
		os.WriteFile("/sys/class/zram-control/hot_remove", []byte(dev), 0)
	}()
	if err := os.WriteFile(sys+"comp_algorithm", []byte("lz4"), 0); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(sys+"disksize", []byte(fmt.Sprint(len(pages))), 0); err != nil {
		t.Fatal(err)
	}
	fd, err := unix.Open("/dev/zram"+dev, unix.O_RDWR|unix.O_DIRECT|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	ps := os.Getpagesize()
	buf, _ := unix.Mmap(-1, 0, 1<<20, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	defer unix.Munmap(buf)
	for o := 0; o < len(pages); o += len(buf) {
		n := copy(buf, pages[o:])
		if _, err := unix.Pwrite(fd, buf[:n], int64(o)); err != nil {
			t.Fatal(err)
		}
	}
	mm, _ := os.ReadFile(sys + "mm_stat")
	lat := make([]time.Duration, 0, len(order))
	for _, i := range order {
		t0 := time.Now()
		if _, err := unix.Pread(fd, buf[:ps], int64(i*ps)); err != nil {
			t.Fatal(err)
		}
		lat = append(lat, time.Since(t0))
		if string(buf[:ps]) != string(pages[i*ps:(i+1)*ps]) {
			t.Fatalf("zram page %d differs", i)
		}
	}
	p50, p99 := quantiles(lat)
	out := fmt.Sprintf("zram (lz4) 4 KiB O_DIRECT read: p50 %v p99 %v; mm_stat %s\n", p50, p99, strings.TrimSpace(string(mm)))
	for _, chunk := range []int{ps, 1 << 20} {
		t0 := time.Now()
		for o := 0; o < len(pages); o += chunk {
			if _, err := unix.Pread(fd, buf[:chunk], int64(o)); err != nil {
				t.Fatal(err)
			}
		}
		d := time.Since(t0)
		out += fmt.Sprintf("zram scan with %d KiB O_DIRECT reads: %v, %.2f GB/s\n", chunk>>10, d, float64(len(pages))/d.Seconds()/1e9)
	}
	return out
}
