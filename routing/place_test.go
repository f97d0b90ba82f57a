package routing

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/s4d-project/s4d/backends"
	"github.com/s4d-project/s4d/backends/corpus"
	"github.com/s4d-project/s4d/backends/cpu"
	"github.com/s4d-project/s4d/internal/topo"
	"github.com/s4d-project/s4d/pagefmt"
)

// fakeGPU is one device of a fake engine with several: it compresses on
// the CPU, counts its batches, can be held busy, and can be lost.
type fakeGPU struct {
	name string
	node int
	cpu  *cpu.Backend
	n    atomic.Int64
	lost atomic.Bool
	hold chan struct{} // when set, batches wait on it
	warm atomic.Bool   // Warming says so
}

func (g *fakeGPU) Name() string        { return g.name }
func (g *fakeGPU) Describe() string    { return "fake GPU" }
func (g *fakeGPU) Engine() string      { return "fakegpu" }
func (g *fakeGPU) NUMANode() int       { return g.node }
func (g *fakeGPU) Close() error        { return nil }
func (g *fakeGPU) Warming([]byte) bool { return g.warm.Load() }
func (g *fakeGPU) Compress(ctx context.Context, b *pagefmt.Batch, out *pagefmt.Compressed) error {
	g.n.Add(1)
	if g.hold != nil {
		<-g.hold
	}
	if err := g.cpu.Compress(ctx, b, out); err != nil {
		return err
	}
	if g.lost.Load() { // after writing its output, as a device lost mid-batch
		return errors.New("device lost")
	}
	return nil
}
func (g *fakeGPU) Decompress(ctx context.Context, d *pagefmt.Decompression) error {
	g.n.Add(1)
	if err := g.cpu.Decompress(ctx, d); err != nil {
		return err
	}
	if g.lost.Load() {
		return errors.New("device lost")
	}
	return nil
}

// fakeMulti stands for the engine's devices (backends.Multi).
type fakeMulti struct{ devs []backends.Backend }

func (m *fakeMulti) Name() string                { return "fakegpu" }
func (m *fakeMulti) Describe() string            { return "fake GPUs" }
func (m *fakeMulti) Devices() []backends.Backend { return m.devs }
func (m *fakeMulti) Close() error                { return nil }
func (m *fakeMulti) Compress(ctx context.Context, b *pagefmt.Batch, out *pagefmt.Compressed) error {
	return m.devs[0].Compress(ctx, b, out)
}
func (m *fakeMulti) Decompress(ctx context.Context, d *pagefmt.Decompression) error {
	return m.devs[0].Decompress(ctx, d)
}

var fakeGPUs []*fakeGPU

// A host of two NUMA nodes, one GPU on each, described under a temporary
// root as /sys and /proc show it: the GPUs' PCI functions with their
// numa_node, the nodes' CPU lists, and two client processes, one whose
// pages are mostly on node 1 (numa_maps), one with no numa_maps whose CPUs
// are all on node 0.
func fakeHost(t *testing.T) topo.Topo {
	root := t.TempDir()
	put := func(p, s string) {
		p = filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	put("sys/bus/pci/devices/0000:1b:00.0/numa_node", "0\n")
	put("sys/bus/pci/devices/0000:9b:00.0/numa_node", "1\n")
	put("sys/devices/system/node/node0/cpulist", "0-7,16-23\n")
	put("sys/devices/system/node/node1/cpulist", "8-15,24-31\n")
	put("proc/100/numa_maps", "7f00 default file=/memfd:s4d anon=10 dirty=10 N0=3 N1=700 kernelpagesize_kB=4\n"+
		"7f80 default anon=5 N0=40\n")
	put("proc/200/status", "Name:\tpy\nCpus_allowed_list:\t0-3,16\n")
	put("proc/300/status", "Cpus_allowed_list:\t0-31\n")
	return topo.Topo{Root: root}
}

func init() {
	for i := range 2 {
		ref, _ := cpu.New(backends.Options{})
		// Nodes are filled in by each test from its faked host.
		fakeGPUs = append(fakeGPUs, &fakeGPU{name: fmt.Sprintf("fakegpu%d", i), node: -1, cpu: ref})
	}
	backends.Register("fakegpu", 95, func(backends.Options) (backends.Backend, error) {
		return &fakeMulti{devs: []backends.Backend{fakeGPUs[0], fakeGPUs[1]}}, nil
	})
}

func TestTopoFaked(t *testing.T) {
	h := fakeHost(t)
	if n := h.PCINode("0000:9B:00.0"); n != 1 {
		t.Fatalf("GPU on node %d, want 1", n)
	}
	if n := h.PCINode("0000:00:00.0"); n != -1 {
		t.Fatalf("missing device on node %d", n)
	}
	if n := h.ProcNode(100); n != 1 {
		t.Fatalf("client 100 (pages on node 1) placed on %d", n)
	}
	if n := h.ProcNode(200); n != 0 {
		t.Fatalf("client 200 (CPUs on node 0) placed on %d", n)
	}
	if n := h.ProcNode(300); n != -1 {
		t.Fatalf("client 300 (CPUs on both nodes) placed on %d", n)
	}
	if _, err := topo.ParseList("3-1"); err == nil {
		t.Fatal("a backwards CPU range was taken")
	}
}

// newPlaced opens the fake engine's two devices next to the cpu engine,
// with the memory of each batch on the node nodeOf says.
func newPlaced(t *testing.T, nodeOf func([]byte) int) (*backends.Set, *Router) {
	h := fakeHost(t)
	for i, bdf := range []string{"0000:1b:00.0", "0000:9b:00.0"} {
		g := fakeGPUs[i]
		g.node, g.hold = h.PCINode(bdf), nil
		g.n.Store(0)
		g.lost.Store(false)
		g.warm.Store(false)
	}
	set := backends.Open(backends.Options{PageSize: 4096}, "fakegpu", "cpu")
	t.Cleanup(set.Close)
	r := New(set, Options{Prefer: "auto", Codec: pagefmt.CodecLZ4, PageSize: 4096,
		Log: slog.New(slog.DiscardHandler), NodeOf: nodeOf})
	return set, r
}

func TestPlaceNearest(t *testing.T) {
	h := fakeHost(t)
	// The memory of client 100 lies on node 1; that of client 200 on node 0.
	client := map[*byte]int{}
	var mu sync.Mutex
	nodeOf := func(mem []byte) int { mu.Lock(); defer mu.Unlock(); return h.ProcNode(client[&mem[0]]) }
	set, r := newPlaced(t, nodeOf)
	names := []string{}
	for _, st := range set.Statuses() {
		names = append(names, st.Name)
	}
	if fmt.Sprint(names) != "[fakegpu0 fakegpu1 cpu]" {
		t.Fatalf("the set lists %v, want each device", names)
	}
	for _, pid := range []int{100, 200, 100} {
		pages := corpus.Pages(corpus.Mixed, 16, 4096, uint64(pid))
		mu.Lock()
		client[&pages[0]] = pid
		mu.Unlock()
		var out pagefmt.Compressed
		name, err := r.Compress(context.Background(), &pagefmt.Batch{PageSize: 4096, Pages: pages}, &out, nil)
		want := map[int]string{100: "fakegpu1", 200: "fakegpu0"}[pid]
		if err != nil || name != want {
			t.Fatalf("client %d's batch went to %s (%v), want %s", pid, name, err, want)
		}
	}
	// --backend fakegpu stands for both devices, the nearest still first.
	r.SetPreference("fakegpu")
	pages := corpus.Pages(corpus.Mixed, 16, 4096, 9)
	mu.Lock()
	client[&pages[0]] = 100
	mu.Unlock()
	if name, err := r.Compress(context.Background(), &pagefmt.Batch{PageSize: 4096, Pages: pages}, new(pagefmt.Compressed), nil); err != nil || name != "fakegpu1" {
		t.Fatalf("preferring the engine: batch went to %s (%v)", name, err)
	}
}

// A batch whose memory tells no node goes to the device nearest its
// client: the node of the client's pages, else of its CPUs (topo.ProcNode).
func TestPlaceClientNode(t *testing.T) {
	h := fakeHost(t)
	_, r := newPlaced(t, func([]byte) int { return -1 })
	if !r.Spread() {
		t.Fatal("devices on nodes 0 and 1 are not spread")
	}
	for _, pid := range []int{100, 200, 100} {
		ctx := WithClientNode(context.Background(), h.ProcNode(pid))
		pages := corpus.Pages(corpus.Mixed, 16, 4096, uint64(pid))
		name, err := r.Compress(ctx, &pagefmt.Batch{PageSize: 4096, Pages: pages}, new(pagefmt.Compressed), nil)
		want := map[int]string{100: "fakegpu1", 200: "fakegpu0"}[pid]
		if err != nil || name != want {
			t.Fatalf("client %d's batch went to %s (%v), want %s", pid, name, err, want)
		}
	}
	// The memory's own node wins over the client's.
	_, r = newPlaced(t, func([]byte) int { return 0 })
	ctx := WithClientNode(context.Background(), 1)
	if name, err := r.Compress(ctx, &pagefmt.Batch{PageSize: 4096, Pages: corpus.Pages(corpus.Mixed, 16, 4096, 1)}, new(pagefmt.Compressed), nil); err != nil || name != "fakegpu0" {
		t.Fatalf("memory on node 0, client on 1: batch went to %s (%v)", name, err)
	}
}

// Batches of unknown memory spread over the devices by queue depth; the
// near device loses a batch to the far one once its queue is more than
// farPenalty batches deeper.
func TestPlaceBalance(t *testing.T) {
	_, r := newPlaced(t, func([]byte) int { return 0 })
	near, far := fakeGPUs[0], fakeGPUs[1]
	near.hold = make(chan struct{})
	var wg sync.WaitGroup
	names := make([]string, farPenalty+2)
	for i := range names {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pages := corpus.Pages(corpus.Mixed, 8, 4096, uint64(i))
			names[i], _ = r.Compress(context.Background(), &pagefmt.Batch{PageSize: 4096, Pages: pages}, new(pagefmt.Compressed), nil)
		}()
		// Wait until this batch is in a queue before sending the next.
		for near.n.Load()+far.n.Load() < int64(i+1) {
			runtime.Gosched()
		}
	}
	close(near.hold)
	wg.Wait()
	if near.n.Load() != farPenalty+1 || far.n.Load() != 1 {
		t.Fatalf("near device took %d batches, far %d (%v); want %d and 1", near.n.Load(), far.n.Load(), names, farPenalty+1)
	}
}

// In an auto chain, the CPU takes a batch when every GPU has spillAt in
// flight and it has none; under --backend fakegpu it does not.
func TestPlaceSpill(t *testing.T) {
	for _, prefer := range []string{"auto", "fakegpu"} {
		_, r := newPlaced(t, func([]byte) int { return -1 })
		r.SetPreference(prefer)
		hold := make(chan struct{})
		fakeGPUs[0].hold, fakeGPUs[1].hold = hold, hold
		var wg sync.WaitGroup
		for i := range 2 * spillAt {
			wg.Add(1)
			go func() {
				defer wg.Done()
				pages := corpus.Pages(corpus.Mixed, 8, 4096, uint64(i))
				r.Compress(context.Background(), &pagefmt.Batch{PageSize: 4096, Pages: pages}, new(pagefmt.Compressed), nil)
			}()
			for fakeGPUs[0].n.Load()+fakeGPUs[1].n.Load() < int64(i+1) {
				runtime.Gosched()
			}
		}
		pages := corpus.Pages(corpus.Mixed, 8, 4096, 99)
		done := make(chan string, 1)
		go func() {
			name, _ := r.Compress(context.Background(), &pagefmt.Batch{PageSize: 4096, Pages: pages}, new(pagefmt.Compressed), nil)
			done <- name
		}()
		var name string
		if prefer == "auto" {
			name = <-done // not held: the CPU took it
		} else {
			for fakeGPUs[0].n.Load()+fakeGPUs[1].n.Load() < 2*spillAt+1 {
				runtime.Gosched() // queued behind a GPU
			}
		}
		gpus := fakeGPUs[0].n.Load() + fakeGPUs[1].n.Load()
		close(hold)
		wg.Wait()
		if prefer != "auto" {
			name = <-done
		}
		if want := map[string]string{"auto": "cpu", "fakegpu": "fakegpu"}[prefer]; !strings.HasPrefix(name, want) {
			t.Fatalf("%s: with both GPUs full the batch went to %s", prefer, name)
		}
		if want := map[string]int64{"auto": 2 * spillAt, "fakegpu": 2*spillAt + 1}[prefer]; gpus != want {
			t.Fatalf("%s: the GPUs took %d batches, want %d", prefer, gpus, want)
		}
		fakeGPUs[0].hold, fakeGPUs[1].hold = nil, nil
	}
}

// A device lost mid-batch hands the batch to the other device, and once
// both are lost, to the CPU: every page comes back.
func TestPlaceDeviceLost(t *testing.T) {
	set, r := newPlaced(t, func([]byte) int { return 1 })
	ref, _ := cpu.New(backends.Options{})
	check := func(want string) {
		t.Helper()
		pages := corpus.Pages(corpus.Mixed, 64, 4096, 3)
		b := &pagefmt.Batch{PageSize: 4096, Pages: pages}
		var out pagefmt.Compressed
		name, err := r.Compress(context.Background(), b, &out, nil)
		if err != nil || name != want {
			t.Fatalf("batch went to %s (%v), want %s", name, err, want)
		}
		page := make([]byte, 4096)
		for i := range 64 {
			if !ref.DecodePage(pagefmt.Stored{Class: out.Class[i], Fill: out.Fill[i], Data: out.Bytes(i, b)}, page) ||
				!bytes.Equal(page, b.Page(i)) {
				t.Fatalf("page %d lost", i)
			}
		}
	}
	check("fakegpu1")
	fakeGPUs[1].lost.Store(true)
	check("fakegpu0")
	fakeGPUs[0].lost.Store(true)
	check("cpu")
	state := map[string]backends.State{}
	for _, st := range set.Statuses() {
		state[st.Name] = st.State
	}
	if state["fakegpu0"] != backends.StateFailed || state["fakegpu1"] != backends.StateFailed || state["cpu"] != backends.StateOK {
		t.Fatalf("states %v", state)
	}
	if r.Fallbacks() != 2 {
		t.Fatalf("fallbacks %d, want 2", r.Fallbacks())
	}
	if b, ok := set.Get("fakegpu"); !ok || b.Name() != "fakegpu" {
		t.Fatal("the engine is not found by its name")
	}
}

// Devices of one engine rank by their sum against other engines, and by
// their own rates among themselves (figures from two H100s, 4096 pages).
func TestRankDevicesTogether(t *testing.T) {
	ref, _ := cpu.New(backends.Options{})
	usable := []backends.Backend{ref, fakeGPUs[0], fakeGPUs[1]}
	rate := map[string][]float64{"cpu": {0.5, 7.7}, "fakegpu0": {0.01, 6.2}, "fakegpu1": {0.01, 6.4}}
	order := rankBy(usable, rate, 2)
	if fmt.Sprint(order) != "[[cpu fakegpu0 fakegpu1] [fakegpu1 fakegpu0 cpu]]" {
		t.Fatalf("order %v", order)
	}
	// One device alone still loses to a faster engine.
	order = rankBy(usable[:2], rate, 2)
	if fmt.Sprint(order) != "[[cpu fakegpu0] [cpu fakegpu0]]" {
		t.Fatalf("one device: order %v", order)
	}
}

// A batch whose memory the devices are still making ready (Warming) goes
// to the next engine, the CPU, when the router chooses (auto); once they
// are ready, or when the devices are asked for by name, to a device.
func TestPlaceWarming(t *testing.T) {
	for _, tc := range []struct {
		prefer string
		warm   bool
		want   string
	}{{"auto", true, "cpu"}, {"auto", false, "fakegpu"}, {"fakegpu", true, "fakegpu"}} {
		_, r := newPlaced(t, func([]byte) int { return -1 })
		r.SetPreference(tc.prefer)
		for _, g := range fakeGPUs {
			g.warm.Store(tc.warm)
		}
		pages := corpus.Pages(corpus.Mixed, 8, 4096, 5)
		out := new(pagefmt.Compressed)
		name, err := r.Compress(context.Background(), &pagefmt.Batch{PageSize: 4096, Pages: pages}, out, nil)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(name, tc.want) {
			t.Fatalf("%s, warming %v: the batch went to %s, want %s", tc.prefer, tc.warm, name, tc.want)
		}
		if len(out.Class) != 8 {
			t.Fatalf("%s, warming %v: %d pages came back", tc.prefer, tc.warm, len(out.Class))
		}
	}
}
