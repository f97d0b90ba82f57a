package cuda

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/s4d-project/s4d/backends"
	"github.com/s4d-project/s4d/backends/cuda/cu"
	"github.com/s4d-project/s4d/backends/internal/dl"
	"github.com/s4d-project/s4d/internal/topo"
	"github.com/s4d-project/s4d/pagefmt"
)

// Every GPU of the host is a Backend of its own (context, worker thread,
// slots, pinned buffers), named "cuda<ordinal>" when there are several and
// "cuda" when one, as before. The set lists each (backends.Multi), so the
// router ranks, balances, falls back and counts per device with the code
// it has for engines: a lost GPU is one more failed backend, its batch
// redone on the next GPU and then the CPU. Every device writes the same
// standard LZ4 blocks and zstd frames, so a page stored by one is read back
// by any other, or by the CPU: the store's per-page backend id (4 bits, by
// name: cuda0, cuda1...) is for `ctl pages` and restarts, never for decoding.

// OpenAll opens the GPUs of o.GPUs, or every visible one: one Backend
// alone, or a Devices holding several.
func OpenAll(o backends.Options) (backends.Backend, error) {
	n, err := deviceCount(o)
	if err != nil {
		return nil, err
	}
	ords := o.GPUs
	if len(ords) == 0 {
		for i := range n {
			ords = append(ords, i)
		}
	}
	for _, i := range ords {
		if i < 0 || i >= n {
			return nil, fmt.Errorf("cuda: no GPU %d: %d visible (ordinals count after CUDA_VISIBLE_DEVICES)", i, n)
		}
	}
	if len(ords) == 1 {
		return openDevice(o, ords[0], "cuda", newGroup(o, false))
	}
	g := newGroup(o, true)
	m := &Devices{}
	var skipped []string
	for _, i := range ords {
		b, err := openDevice(o, i, fmt.Sprintf("cuda%d", i), g)
		if err != nil {
			// A GPU the backend cannot use (too old, out of memory) leaves
			// the others in service.
			skipped = append(skipped, fmt.Sprintf("GPU %d: %v", i, err))
			if len(m.devs) == 0 && i == ords[len(ords)-1] {
				return nil, err
			}
			continue
		}
		m.devs = append(m.devs, b)
	}
	if len(m.devs) == 0 {
		return nil, backends.Unavailable("no usable GPU: %s", strings.Join(skipped, "; "))
	}
	if len(m.devs) == 1 {
		m.devs[0].name = "cuda" // one device keeps today's name and stats
		return m.devs[0], nil
	}
	m.describe = fmt.Sprintf("%d GPUs", len(m.devs))
	if len(skipped) > 0 {
		m.describe += " (left out: " + strings.Join(skipped, "; ") + ")"
	}
	return m, nil
}

// deviceCount asks the driver how many GPUs are visible.
func deviceCount(o backends.Options) (int, error) {
	l, err := dl.Open("libcuda.so.1")
	if err != nil {
		return 0, backends.Unavailable("no NVIDIA driver: %v", err)
	}
	var d cu.Driver
	if err := d.Load(l); err != nil {
		return 0, backends.Unavailable("NVIDIA driver too old: %v", err)
	}
	if err := d.Init(); err != nil {
		return 0, backends.Unavailable("no usable CUDA device: %v", err)
	}
	n, err := d.DeviceCount()
	if err != nil || n == 0 {
		return 0, backends.Unavailable("no CUDA device (count %d, %v)", n, err)
	}
	return n, nil
}

// numaNode is the NUMA node of the GPU's PCIe link, from its bus id.
func (b *Backend) numaNode() int {
	bus, err1 := b.drv.DeviceAttr(b.dev, 33)  // CU_DEVICE_ATTRIBUTE_PCI_BUS_ID
	slot, err2 := b.drv.DeviceAttr(b.dev, 34) // CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID
	dom, err3 := b.drv.DeviceAttr(b.dev, 50)  // CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID
	if err := errors.Join(err1, err2, err3); err != nil {
		return -1
	}
	b.bdf = fmt.Sprintf("%04x:%02x:%02x.0", dom, bus, slot)
	return topo.Host.PCINode(b.bdf)
}

// where names the device among several: ordinal, PCI address, NUMA node.
func (b *Backend) where() string {
	if !b.grp.multi {
		return ""
	}
	s := fmt.Sprintf(", GPU %d at %s", b.ordinal, b.bdf)
	if b.node >= 0 {
		s += fmt.Sprintf(" on NUMA node %d", b.node)
	}
	return s
}

// Engine and NUMANode place the device among its peers (routing.Device).
func (b *Backend) Engine() string { return "cuda" }
func (b *Backend) NUMANode() int  { return b.node }

// Devices is the engine over several GPUs, for callers that ask for the
// engine by name (the set's Get: bench, --backend cuda): each batch goes
// to the least busy device, and to the next on a device's failure.
type Devices struct {
	devs     []*Backend
	describe string
	next     atomic.Uint64
}

func (m *Devices) Name() string     { return "cuda" }
func (m *Devices) Describe() string { return m.describe }
func (m *Devices) ChecksSums()      {}

// Devices lists the GPUs as backends of their own (backends.Multi).
func (m *Devices) Devices() []backends.Backend {
	out := make([]backends.Backend, len(m.devs))
	for i, d := range m.devs {
		out[i] = d
	}
	return out
}

// order lists the open devices, starting from the next in turn.
func (m *Devices) order() []*Backend {
	start := int(m.next.Add(1))
	out := make([]*Backend, 0, len(m.devs))
	for i := range m.devs {
		if d := m.devs[(start+i)%len(m.devs)]; !d.closed() {
			out = append(out, d)
		}
	}
	return out
}

// try runs fn on each device in turn until one succeeds.
func (m *Devices) try(ctx context.Context, fn func(*Backend) error) error {
	err := errors.New("cuda: every GPU closed")
	for _, d := range m.order() {
		if err = fn(d); err == nil || ctx.Err() != nil {
			return err
		}
	}
	return err
}

func (m *Devices) Compress(ctx context.Context, b *pagefmt.Batch, out *pagefmt.Compressed) error {
	return m.try(ctx, func(d *Backend) error { return d.Compress(ctx, b, out) })
}

func (m *Devices) CompressParts(ctx context.Context, b *pagefmt.Batch, deliver func(lo int, part *pagefmt.Compressed) error) error {
	var derr error
	err := m.try(ctx, func(d *Backend) error {
		err := d.CompressParts(ctx, b, func(lo int, part *pagefmt.Compressed) error {
			derr = deliver(lo, part)
			return derr
		})
		if derr != nil && !pagefmt.IsPlaceError(derr) {
			return nil // the deliverer's error ends the batch: no device failed
		}
		return err
	})
	if derr != nil && !pagefmt.IsPlaceError(derr) {
		return derr
	}
	return err
}

func (m *Devices) Decompress(ctx context.Context, dd *pagefmt.Decompression) error {
	return m.try(ctx, func(d *Backend) error { return d.Decompress(ctx, dd) })
}

func (m *Devices) Takes(codec pagefmt.Codec, pageSize int) bool { return true }

// Pin registers mem once for every GPU (see group).
func (m *Devices) Pin(mem []byte) (func(), error) {
	var unpin func()
	err := m.try(context.Background(), func(d *Backend) (err error) { unpin, err = d.Pin(mem); return })
	return unpin, err
}

func (m *Devices) HostBuffer(n int) ([]byte, error) {
	var buf []byte
	err := m.try(context.Background(), func(d *Backend) (err error) { buf, err = d.HostBuffer(n); return })
	return buf, err
}

func (m *Devices) FreeHostBuffer(buf []byte) { m.devs[0].FreeHostBuffer(buf) }

func (m *Devices) Close() error {
	for _, d := range m.devs {
		d.Close()
	}
	return nil
}

func (b *Backend) closed() bool {
	select {
	case <-b.quit:
		return true
	default:
		return false
	}
}

// group is the host memory registered with the GPUs, shared by all of
// them: with several, memory is registered once as portable (pinned for
// every context), so a client's buffer or a store slab is one registration
// whichever devices read it, and the bound counts it once.
type group struct {
	multi bool
	limit int64      // bytes registered at most (GPUPinLimit)
	reg   sync.Mutex // one registration at a time: the same memory is never registered twice
	mu    sync.RWMutex
	held  int64       // bytes registered now
	devs  int         // devices open
	pins  []hostRange // under mu; changed under reg too
}

func newGroup(o backends.Options, multi bool) *group {
	g := &group{multi: multi, limit: o.GPUPinLimit}
	if g.limit <= 0 {
		var si unix.Sysinfo_t
		if unix.Sysinfo(&si) == nil {
			g.limit = int64(si.Totalram) * int64(si.Unit) / 4
		}
	}
	return g
}

// hostRange is host memory the GPUs read directly: a buffer from
// HostBuffer (allocated pinned) or a caller's memory registered by Pin.
type hostRange struct {
	mem        []byte
	registered bool
	dev        cu.DevPtr // where kernels reach mem (0: copies only)
	owner      int       // the ordinal of the device that registered it
	refs       int       // Pins of it not yet undone
}

func (r hostRange) release(d *cu.Driver) {
	if r.registered {
		d.HostUnregister(r.mem)
	} else {
		d.HostFree(r.mem)
	}
}

// devPtr is where device ord reaches r (0: copies only). Among several
// GPUs the address is the registering context's; other devices use it
// only where it is the host address, which holds for all of them when
// each can use host pointers for registered memory (all recent GPUs).
func (g *group) devPtr(r *hostRange, ord int) cu.DevPtr {
	if !g.multi || r.owner == ord || r.dev == cu.DevPtr(uintptr(unsafe.Pointer(unsafe.SliceData(r.mem)))) {
		return r.dev
	}
	return 0
}

func (g *group) find(mem []byte) int {
	for i, p := range g.pins {
		if len(p.mem) == len(mem) && unsafe.SliceData(p.mem) == unsafe.SliceData(mem) {
			return i
		}
	}
	return -1
}

func (g *group) join() { g.mu.Lock(); g.devs++; g.mu.Unlock() }

// leave notes that b is closing, on its worker. The last device releases
// every range; one that registered ranges others still use keeps its
// context (releasing it would unregister them) and says so.
func (g *group) leave(b *Backend) (keepCtx bool) {
	g.reg.Lock()
	defer g.reg.Unlock()
	g.mu.Lock()
	defer g.mu.Unlock()
	g.devs--
	if g.devs > 0 {
		for _, p := range g.pins {
			if p.owner == b.ordinal {
				return true
			}
		}
		return false
	}
	for _, p := range g.pins {
		p.release(&b.drv)
	}
	g.pins, g.held = nil, 0
	return false
}

// HostBuffer returns n bytes of pinned host memory. Batches whose pages lie
// inside such a buffer are uploaded from it directly, skipping the copy
// into the backend's own staging buffers: a caller that receives pages
// into it saves a pass over every byte. Release it with FreeHostBuffer;
// Close frees those left.
func (b *Backend) HostBuffer(n int) ([]byte, error) {
	if n <= 0 {
		return nil, fmt.Errorf("cuda: host buffer of %d bytes", n)
	}
	var buf []byte
	err := b.do(context.Background(), func() error {
		var err error
		if buf, err = b.drv.HostAlloc(n); err == nil {
			g := b.grp
			g.mu.Lock()
			g.pins = append(g.pins, hostRange{mem: buf, dev: b.drv.HostDevPtr(buf), owner: b.ordinal, refs: 1})
			g.held += int64(n)
			g.mu.Unlock()
		}
		return err
	})
	return buf, err
}

// FreeHostBuffer releases a buffer from HostBuffer.
func (b *Backend) FreeHostBuffer(buf []byte) { b.unpin(buf) }

// Pin page-locks mem (the caller's, page aligned) so that batches inside
// it are uploaded straight from it; see backends.Pinner. Registering once
// and reusing the memory is what makes this pay: registering per batch
// measured slower than copying into staging buffers. Among several GPUs,
// memory another device registered is only counted once more.
func (b *Backend) Pin(mem []byte) (func(), error) {
	if len(mem) == 0 || uintptr(unsafe.Pointer(&mem[0]))%4096 != 0 {
		return nil, errors.New("cuda: Pin needs page-aligned memory")
	}
	g := b.grp
	g.reg.Lock()
	defer g.reg.Unlock()
	g.mu.Lock()
	if i := g.find(mem); i >= 0 {
		g.pins[i].refs++
		g.mu.Unlock()
		return b.unpinOnce(mem), nil
	}
	over := g.limit > 0 && g.held+int64(len(mem)) > g.limit
	held := g.held
	g.mu.Unlock()
	if over {
		return nil, fmt.Errorf("cuda: registering %d bytes would pass the bound of %d (%d registered; --gpu-pin-limit)", len(mem), g.limit, held)
	}
	err := b.do(context.Background(), func() error {
		if err := b.drv.HostRegister(mem); err != nil {
			return err
		}
		g.mu.Lock()
		g.pins = append(g.pins, hostRange{mem: mem, registered: true, dev: b.drv.HostDevPtr(mem), owner: b.ordinal, refs: 1})
		g.held += int64(len(mem))
		g.mu.Unlock()
		return nil
	})
	if err != nil {
		return nil, err
	}
	return b.unpinOnce(mem), nil
}

func (b *Backend) unpinOnce(mem []byte) func() {
	var once sync.Once
	return func() { once.Do(func() { b.unpin(mem) }) }
}

// unpin drops one hold on mem; the last unregisters it, on b's worker or,
// if b is closed, another open device's (any context may undo a portable
// registration).
func (b *Backend) unpin(mem []byte) {
	g := b.grp
	g.reg.Lock()
	defer g.reg.Unlock()
	g.mu.Lock()
	i := g.find(mem)
	if i < 0 {
		g.mu.Unlock()
		return
	}
	if g.pins[i].refs--; g.pins[i].refs > 0 {
		g.mu.Unlock()
		return
	}
	r := g.pins[i]
	g.pins = append(g.pins[:i], g.pins[i+1:]...)
	g.held -= int64(len(r.mem))
	g.mu.Unlock()
	// Taken out of the list first: no batch starts on it while it goes.
	release := func(d *Backend) error {
		return d.do(context.Background(), func() error { r.release(&d.drv); return nil })
	}
	if release(b) == nil {
		return
	}
	for _, d := range allDevices(g) {
		if d != b && release(d) == nil {
			return
		}
	}
}

// devices of each group, for unpin's fallback to another worker.
var (
	groupsMu sync.Mutex
	groups   = map[*group][]*Backend{}
)

func allDevices(g *group) []*Backend {
	groupsMu.Lock()
	defer groupsMu.Unlock()
	return append([]*Backend(nil), groups[g]...)
}

func (g *group) add(b *Backend) {
	g.join()
	groupsMu.Lock()
	groups[g] = append(groups[g], b)
	groupsMu.Unlock()
}

func (g *group) drop(b *Backend) {
	groupsMu.Lock()
	defer groupsMu.Unlock()
	l := groups[g]
	for i, d := range l {
		if d == b {
			l = append(l[:i], l[i+1:]...)
			break
		}
	}
	if len(l) == 0 {
		delete(groups, g)
	} else {
		groups[g] = l
	}
}

// inPinned reports whether all of s lies inside one pinned range.
func (b *Backend) inPinned(s []byte) bool {
	if len(s) == 0 {
		return false
	}
	lo := uintptr(unsafe.Pointer(&s[0]))
	hi := lo + uintptr(len(s))
	g := b.grp
	g.mu.RLock()
	defer g.mu.RUnlock()
	for _, p := range g.pins {
		plo := uintptr(unsafe.Pointer(&p.mem[0]))
		if lo >= plo && hi <= plo+uintptr(len(p.mem)) {
			return true
		}
	}
	return false
}
