package webgpu

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/s4d-project/s4d/backends"
	"github.com/s4d-project/s4d/backends/vulkan/vk"
	"github.com/s4d-project/s4d/pagefmt"
)

// A Vulkan slot's results buffer (host memory the engine imported): the
// kernel's parameters, the packed total, the per-page metadata, then the
// packed blocks; offsets 256-aligned for any device's binding alignment.
const (
	vkParamsOff = 0
	vkTotalOff  = 256
	vkInfoOff   = 512
)

func vkPackedOff(capPages int) int { return (vkInfoOff + capPages*metaWords*4 + 4095) &^ 4095 }

// vkSlot is a compress slot's Vulkan side; set is its descriptor set.
type vkSlot struct {
	set      int
	capPages int
	out      *hostBuf // parameters, total, metadata, packed blocks
	stage    *hostBuf // the pages of a batch in no imported mapping
}

func (v *vkSlot) free() {
	v.out.free()
	v.stage.free()
	v.out, v.stage, v.capPages = nil, nil, 0
}

// vkDSlot is a decompression slot's Vulkan side.
type vkDSlot struct {
	set         int
	cap, srcCap int
	in          *hostBuf   // desc (8 bytes a block, room for cap), then the blocks
	din         *vk.Buffer // in's device copy (vkrt.devIn)
	out         *hostBuf   // parameters, status (4 bytes a page), then the pages
	lastTotal   int        // the blocks' bytes of the last round (benchmarks)
	// A gathered GET's buffers (vulkan_gather.go): the blocks, their
	// device copy, the decoded pages (device memory), the metadata.
	gin, gm       *hostBuf
	gdin, gout    *vk.Buffer
	gcap, gsrcCap int
}

func (v *vkDSlot) free() {
	v.freeDecomp()
	v.freeGather()
}

func (v *vkDSlot) freeDecomp() {
	v.in.free()
	v.out.free()
	if v.din != nil {
		v.din.Release()
	}
	v.in, v.din, v.out, v.cap, v.srcCap = nil, nil, nil, 0, 0
}

// slotCaps rounds a round's pages and block bytes up to what a slot's
// buffers are made for: powers of two, at least 64 pages and 64 KiB, so
// that they grow in few steps.
func slotCaps(n, total int) (c, sc int) {
	c, sc = 64, 1<<16
	for c < n {
		c *= 2
	}
	for sc < total {
		sc *= 2
	}
	return c, sc
}

// newBlocksBuf makes a decompression round's input: room bytes of
// descriptors, then sc bytes of blocks, in imported host memory, and on a
// discrete GPU its copy in device memory (devInFor).
func (rt *vkrt) newBlocksBuf(room, sc int) (*hostBuf, *vk.Buffer, error) {
	in, err := rt.newHostBuf(room + sc)
	if err != nil || !rt.devIn {
		return in, nil, err
	}
	din, err := rt.d.NewBuffer(int64(len(in.mem)))
	if err != nil {
		in.free()
		return nil, nil, err
	}
	return in, din, nil
}

// newVulkan opens the engine on the Vulkan runtime.
func newVulkan(o backends.Options, allowCPU, auto bool) (*Backend, error) {
	r, err := openVulkan(o, allowCPU, auto)
	if err != nil {
		return nil, err
	}
	extra, dslots := vkSlotCounts()
	b := &Backend{vk: r, slots: make(chan *slot, numSlots), extra: make(chan *slot, extra), gone: make(chan struct{})}
	b.dslots = make(chan *dslot, dslots)
	if err := b.setupVulkan(); err != nil {
		r.close()
		return nil, err
	}
	b.startSweep()
	return b, nil
}

func (b *Backend) closeVulkan() {
	if !b.vkClosed.CompareAndSwap(false, true) {
		return
	}
	// Every slot back first: the one received is not necessarily the
	// one of b.all at hand, which may still be in a round.
	for _, s := range b.all {
		if s.extra {
			<-b.extra
		} else {
			<-b.slots
		}
	}
	for range b.dall {
		<-b.dslots
	}
	for _, s := range b.all {
		s.vs.free()
	}
	for _, ds := range b.dall {
		ds.vs.free()
	}
	b.all, b.dall = nil, nil
	b.vk.close()
}

// vkRound compresses pages [lo, hi) of in on slot s: the kernel reads the
// pages where they are (an imported mapping) or from the slot's staging,
// and writes its results into the slot's imported results buffer, which
// the shared code then checks and hands on as the webgpu runtime's
// mapped readback.
func (b *Backend) vkRound(s *slot, in *pagefmt.Batch, out *pagefmt.Compressed, lo, hi int, mu *sync.Mutex, tn *turn, pt *parts, r int) error {
	defer tn.release()
	rt, v, m := b.vk, s.vs, hi-lo
	t0 := time.Now()
	pp, tp := &rt.prof.put, t0
	pp.rounds.Add(1)
	pp.pages.Add(int64(m))
	if m > v.capPages {
		v.free()
		c := 64
		for c < m {
			c *= 2
		}
		var err error
		if v.out, err = rt.newHostBuf(vkPackedOff(c) + c*PageSize); err != nil {
			return err
		}
		v.capPages = c
	}
	pages := in.Pages[lo*PageSize : hi*PageSize]
	im, off := rt.lookup(pages)
	defer rt.done(im)
	var src *vk.Buffer
	if im != nil {
		src = im.buf
		rt.nDirect.Add(1)
	} else {
		if v.stage == nil {
			var err error
			if v.stage, err = rt.newHostBuf(v.capPages * PageSize); err != nil {
				return err
			}
		}
		tn.wait()
		parallelCopy(v.stage.mem, pages, tn.procs())
		tn.release()
		src, off = v.stage.buf, 0
		rt.nStaged.Add(1)
	}
	lap(1, &t0)
	pp.add(pStage, &tp)
	o := v.out.mem
	binary.LittleEndian.PutUint32(o[vkParamsOff:], uint32(m))
	binary.LittleEndian.PutUint32(o[vkParamsOff+4:], uint32(in.Threshold))
	binary.LittleEndian.PutUint32(o[vkTotalOff:], 0)
	pk := vkPackedOff(v.capPages)
	k := rt.compress
	for i, x := range []struct {
		buf       *vk.Buffer
		off, size int64
	}{{src, off, int64(m * PageSize)}, {v.out.buf, int64(pk), int64(m * PageSize)},
		{v.out.buf, vkInfoOff, int64(m * metaWords * 4)}, {v.out.buf, vkParamsOff, 16}, {v.out.buf, vkTotalOff, 16}} {
		if err := k.BindSet(v.set, i, x.buf, x.off, x.size); err != nil {
			return err
		}
	}
	t, err := k.DispatchSet(v.set, m, 1, 1, vk.Ticket{})
	if err != nil {
		return err
	}
	pp.gpu.enter()
	lap(2, &t0)
	pp.add(pSubmit, &tp)
	if err = rt.d.Wait(t, rt.wait); err == nil {
		err = faultLost()
	}
	pp.gpu.leave()
	if err != nil {
		return err
	}
	lap(3, &t0)
	pp.add(pWait, &tp)
	defer pp.add(pDeliver, &tp)
	s.n = m
	s.meta32 = pagefmt.Resize(s.meta32, m*metaWords)
	for i := range s.meta32 {
		s.meta32[i] = binary.LittleEndian.Uint32(o[vkInfoOff+4*i:])
	}
	total := int(binary.LittleEndian.Uint32(o[vkTotalOff:]))
	if total > m*PageSize || total%4 != 0 {
		return fmt.Errorf("vulkan: packed size %d out of range", total)
	}
	s.total32 = total
	s.data = o[pk : pk+total]
	defer func() { s.data = nil }()
	limit := uint32(min(in.Threshold, PageSize))
	if pt != nil {
		return pt.deliverRound(b, s, r, lo, limit)
	}
	mu.Lock()
	defer mu.Unlock()
	base := len(out.Data)
	out.Data = slices.Grow(out.Data, total)[:base+total]
	parallelCopy(out.Data[base:], s.data, 8)
	lap(6, &t0)
	return b.fill(s, out, lo, uint32(base), total, limit)
}

// vkDecompress runs the decompress kernel over the blocks idx of d: they
// are packed into the slot's imported input (on a discrete GPU copied on
// into device memory, devInFor), the kernel writes the pages into its
// imported output, and the shared copyOut puts them in place.
func (b *Backend) vkDecompress(s *dslot, d *pagefmt.Decompression, idx []int, meanwhile func()) error {
	rt, v, n := b.vk, s.vs, len(idx)
	total := blocksBytes(d, idx)
	if n > v.cap || total > v.srcCap {
		v.freeDecomp()
		c, sc := slotCaps(n, total)
		var err error
		if v.in, v.din, err = rt.newBlocksBuf(vkDescRoom(c), sc); err != nil {
			return err
		}
		if v.out, err = rt.newHostBuf(vkPagesOff(c) + c*PageSize); err != nil {
			v.freeDecomp()
			return err
		}
		v.cap, v.srcCap = c, sc
	}
	b.dlast.Store(s)
	s.lastN, v.lastTotal = n, total
	pg, tp := &rt.prof.get, time.Now()
	pg.rounds.Add(1)
	pg.pages.Add(int64(n))
	in, o := v.in.mem, v.out.mem
	dr := vkDescRoom(v.cap)
	packBlocks(in[:8*n], in[dr:], d, idx)
	pg.add(pPack, &tp)
	binary.LittleEndian.PutUint32(o[vkParamsOff:], uint32(n))
	binary.LittleEndian.PutUint32(o[vkParamsOff+4:], 0) // pages in order (not placed)
	po := vkPagesOff(v.cap)
	k, src, after, dispatched := rt.decomp, v.in.buf, vk.Ticket{}, false
	if v.din != nil {
		var err error
		after, err = rt.d.Copy(v.din, v.in.buf, []vk.Region{{Src: 0, Dst: 0, Size: int64(8 * n)},
			{Src: int64(dr), Dst: int64(dr), Size: int64(total)}}, vk.Ticket{})
		if err != nil {
			return err
		}
		src = v.din
		defer func() {
			if !dispatched {
				rt.d.Wait(after, rt.wait) // the copy reads the slot's input: done before it is reused or freed
			}
		}()
	}
	for i, x := range []struct {
		buf       *vk.Buffer
		off, size int64
	}{{src, int64(dr), int64(total)}, {src, 0, int64(8 * n)}, {v.out.buf, int64(po), int64(n * PageSize)},
		{v.out.buf, vkTotalOff, int64(4 * n)}, {v.out.buf, vkParamsOff, 16}} {
		if err := k.BindSet(v.set, i, x.buf, x.off, x.size); err != nil {
			return err
		}
	}
	t, err := k.DispatchSet(v.set, n, 1, 1, after)
	if err != nil {
		return err
	}
	dispatched = true // its wait below covers the copy
	pg.gpu.enter()
	pg.add(pSubmit, &tp)
	if meanwhile != nil {
		meanwhile()
		pg.add(pOther, &tp)
	}
	if err = rt.d.Wait(t, rt.wait); err == nil {
		err = faultLost()
	}
	pg.gpu.leave()
	if err != nil {
		return err
	}
	pg.add(pWait, &tp)
	copyOut(o[po:po+n*PageSize], o[vkTotalOff:vkTotalOff+4*n], d, idx)
	pg.add(pDeliver, &tp)
	return nil
}

// vkDKernelPass reruns the decompress kernel over the blocks of slot s's
// last batch, without host work, and waits: what the device sustains.
// For benchmarks.
func (b *Backend) vkDKernelPass(s *dslot) error {
	b.idleMu.RLock()
	defer b.idleMu.RUnlock()
	if s.vs.in == nil {
		return errors.New("vulkan: the slot's buffers were freed (idle)")
	}
	t, err := b.vk.decomp.DispatchSet(s.vs.set, s.lastN, 1, 1, vk.Ticket{})
	if err != nil {
		return err
	}
	return b.vk.d.Wait(t, b.vk.wait)
}

// vkDescRoom is the room for cap blocks' descriptors, before the blocks.
func vkDescRoom(capPages int) int { return (8*capPages + 255) &^ 255 }

// vkPagesOff is where the decoded pages start in a decompression slot's
// output, after the parameters and the status words.
func vkPagesOff(capPages int) int { return (vkTotalOff + 4*capPages + 4095) &^ 4095 }

// pinBackend is the engine on the Vulkan runtime: it also imports host
// memory (backends.Pinner), which the daemon offers it for every client
// mapping and the store's slabs.
type pinBackend struct{ *Backend }

// Pin registers mem for import (counted against --gpu-pin-limit; imported
// by the first compress round that reads from it);
// batches whose pages lie inside it are read by the kernel in place.
func (p pinBackend) Pin(mem []byte) (func(), error) { return p.vk.pin(mem) }

// Warming is backends.Warming: whether mem's mapping is being imported
// (its batches would be staged meanwhile), the import started if not.
func (p pinBackend) Warming(mem []byte) bool { return p.vk.warming(mem) }
