package webgpu

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/s4d-project/s4d/backends/vulkan/vk"
)

// A per-stage profile of the Vulkan runtime, for finding where the daemon
// loses time against the kernels alone (docs/benchmarks/
// 2026-12-03-vulkan-limits.md). The counters are always kept (a few
// atomic adds a round); S4D_VULKAN_PROF=1 appends them to Describe, which
// `s4d ctl stats` shows, so that a harness can diff two snapshots.
const envProf = "S4D_VULKAN_PROF"

// Steps of a compress round and of a decompression. wait runs from the
// dispatch until Wait returns: queueing behind other slots' dispatches,
// the kernel, and waking up.
const (
	pSlot    = iota // waiting for a free slot (descriptor set)
	pStage          // looking the pages up, or copying them into staging
	pSubmit         // parameters, descriptor set, dispatch
	pWait           // the dispatch's completion
	pDeliver        // PUT: the metadata checks and the caller's deliver (the store); GET: copy out
	pPack           // GET: packing the LZ4 blocks into the slot's input
	pOther          // GET: the other classes on the CPU, while the kernel runs
	nSteps
)

var stepNames = [nSteps]string{"slot", "stage", "submit", "wait", "deliver", "pack", "other"}

// busyClock sums the time during which at least one holder is in.
type busyClock struct {
	mu    sync.Mutex
	n     int
	since time.Time
	total time.Duration
	max   int // most holders at once
}

func (c *busyClock) enter() {
	c.mu.Lock()
	if c.n == 0 {
		c.since = time.Now()
	}
	c.n++
	c.max = max(c.max, c.n)
	c.mu.Unlock()
}

func (c *busyClock) leave() {
	c.mu.Lock()
	if c.n--; c.n == 0 {
		c.total += time.Since(c.since)
	}
	c.mu.Unlock()
}

func (c *busyClock) read() (time.Duration, int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := c.total
	if c.n > 0 {
		t += time.Since(c.since)
	}
	return t, c.max
}

// dirProf is one direction's profile.
type dirProf struct {
	calls, rounds, pages atomic.Int64
	step                 [nSteps]atomic.Int64 // nanoseconds, summed over rounds
	active               busyClock            // a call of this direction under way
	gpu                  busyClock            // a dispatch of this direction outstanding
}

func (p *dirProf) add(k int, t0 *time.Time) {
	now := time.Now()
	p.step[k].Add(int64(now.Sub(*t0)))
	*t0 = now
}

func (p *dirProf) String() string {
	ms := func(d time.Duration) string { return fmt.Sprintf("%.1f", float64(d)/1e6) }
	act, _ := p.active.read()
	gpu, flight := p.gpu.read()
	var sb strings.Builder
	fmt.Fprintf(&sb, "calls=%d rounds=%d pages=%d active_ms=%s gpu_ms=%s maxflight=%d", p.calls.Load(), p.rounds.Load(),
		p.pages.Load(), ms(act), ms(gpu), flight)
	for k, name := range stepNames {
		if v := p.step[k].Load(); v != 0 {
			fmt.Fprintf(&sb, " %s_ms=%s", name, ms(time.Duration(v)))
		}
	}
	return sb.String()
}

// vkProf is the runtime's profile: both directions and the imports.
type vkProf struct {
	put, get          dirProf
	importN, importNs atomic.Int64
}

// describe is the profile as Describe shows it, with d's submissions
// (vk.Device.SubmitStats).
func (p *vkProf) describe(d *vk.Device) string {
	s := d.SubmitStats()
	return fmt.Sprintf("prof{put: %s; get: %s; import: n=%d ms=%.1f; submit: n=%d calls=%d lock_ms=%.1f call_ms=%.1f "+
		"calls_100us=%d calls_1ms=%d calls_10ms=%d calls_100ms=%d}", &p.put, &p.get,
		p.importN.Load(), float64(p.importNs.Load())/1e6, s.N, s.Calls, float64(s.Lock)/1e6, float64(s.Call)/1e6,
		s.Slow[0], s.Slow[1], s.Slow[2], s.Slow[3])
}

var profShown = os.Getenv(envProf) == "1"

// Rounds in flight on the Vulkan runtime. S4D_VULKAN_SLOTS sets the
// compress slots in all (numSlots of them for a lone batch, the rest for
// overlapping batches) and S4D_VULKAN_DSLOTS the decompression slots,
// each at most vkSlotSets, for measuring how many the daemon needs.
const (
	envSlots  = "S4D_VULKAN_SLOTS"
	envDSlots = "S4D_VULKAN_DSLOTS"
)

// A GET round on a discrete GPU copies its packed blocks into device
// memory (one copy on the transfer queue), and the decompress kernel
// parses them there instead of across the bus: its chain of dependent
// reads ran 1.17x faster (13.6 against 11.6 GB/s of LZ4 pages), and GET
// through the daemon 1.07x / 1.13x at batches 4096 / 16384 (H200, means
// of 2 runs, 2026-12-03-vulkan-devin-idle.md). Elsewhere (an integrated
// GPU or a CPU device, whose device memory is the host's) the copy would
// only add work. envDevIn=1 or 0 forces it either way.
const envDevIn = "S4D_VULKAN_DEVIN"

func devInFor(info vk.Info) bool {
	switch os.Getenv(envDevIn) {
	case "1":
		return true
	case "0":
		return false
	}
	return info.Discrete
}

// vkSlotSets bounds each kind of slot: a slot owns a descriptor set of
// its kernel (a decompression slot also gatherGroups of the gather
// kernel's). vkSlots is the default of each.
const (
	vkSlotSets = 16
	vkSlots    = 8
)

// The defaults: vkSlots of each, since a slot is
// held from its dispatch until the store has copied its results (PUT) or
// the pages are in place (GET). On an H200 through the daemon, 8
// compress slots against 4 raised PUT from 8.7 to 11.4 GB/s at batch
// 4096, and 8 decompression slots against 4 raised GET from 18.8 / 22.2
// to 20.5 / 24.7 GB/s at batch 4096 / 16384; a set grows to up to 128
// MiB of host memory (2026-12-03-vulkan-limits.md).
//
// vkSlotCounts returns the extra compress slots and the decompression
// slots to make.
func vkSlotCounts() (extra, dslots int) {
	extra, dslots = max(0, vkSlots-numSlots), vkSlots
	if n, err := strconv.Atoi(os.Getenv(envSlots)); err == nil && n >= numSlots && n <= vkSlotSets {
		extra = n - numSlots
	}
	if n, err := strconv.Atoi(os.Getenv(envDSlots)); err == nil && n >= 1 && n <= vkSlotSets {
		dslots = n
	}
	return extra, dslots
}
