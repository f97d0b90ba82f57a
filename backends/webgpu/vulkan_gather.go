package webgpu

import (
	"context"
	"encoding/binary"
	"os"
	"strconv"
	"sync"
	"time"
	"unsafe"

	"github.com/s4d-project/s4d/backends/vulkan/spirv"
	"github.com/s4d-project/s4d/backends/vulkan/vk"
	"github.com/s4d-project/s4d/pagefmt"
)

// A GET into an imported client mapping (GET_FD) on the Vulkan runtime
// moves its pages on the GPU alone (vkGet): the decompress kernel writes
// the pages of LZ4 blocks straight into their places in the client's
// mapping, and the gather kernel (wgsl/gather.wgsl) copies the raw pages
// there, read where the store keeps them (its slabs, imported), checking
// their sums on the way. The host packs the LZ4 blocks and fills zero and
// same-filled pages. Elsewhere the host copies every page once more: raw
// pages from the store and decoded pages from the engine's buffer
// (Decompress), which held GET at the cpu engine's speed.
//
// The two kernels' submissions do not depend on each other: a submission
// that waits (on a semaphore) stalls the whole queue behind it on NVIDIA,
// so the gather goes first, and only the decompress waits, for its
// blocks' copy to device memory.
const (
	gatherSources = 6 // source bindings of the gather kernel
	// gatherGroups is how many gather dispatches a round may make: the
	// gather kernel's descriptor sets of a decompression slot.
	gatherGroups = vk.Sets / vkSlotSets
	// gatherMaxBind bounds a bound source: Vulkan guarantees
	// maxStorageBufferRange >= 2^27 (a store slab mapping is 16 MiB).
	gatherMaxBind = 1 << 27
)

// Where a gather round's metadata lies in a slot's gm buffer: the
// decompress kernel's parameters and status words, then one 256-byte
// parameters block per gather group, then each group's descriptors
// (16 bytes a page) and status words (4), each group 256-aligned.
const gmStatusOff = 256

func gmParamsOff(c int) int { return (gmStatusOff + 4*c + 255) &^ 255 }
func gmGroupsOff(c int) int { return gmParamsOff(c) + 256*gatherGroups }
func gmSize(c int) int      { return gmGroupsOff(c) + 20*c + 256*gatherGroups }

// gatherPlan is one vkGet's sorting of its pages (pooled).
type gatherPlan struct {
	lz, host []int
	group    [gatherGroups][]int // the raw pages each gather dispatch copies
	held     []*vkImport         // source q is held[q]
	miss     [][2]uintptr        // pinned ranges not imported yet: their pages go to the host
	srcOf    []int32             // a gathered page's source
	sets     []int               // the gather dispatches' descriptor sets
	sizes    []int               // and workgroups
}

var gatherPlans = sync.Pool{New: func() any { return new(gatherPlan) }}

func (g *gatherPlan) reset(n int) {
	g.lz, g.host, g.held, g.miss = g.lz[:0], g.host[:0], g.held[:0], g.miss[:0]
	for i := range g.group {
		g.group[i] = g.group[i][:0]
	}
	if cap(g.srcOf) < n {
		g.srcOf = make([]int32, n)
	}
	g.srcOf = g.srcOf[:n]
}

// source returns the gather source holding the raw page p, taking its
// import for the round, or -1: the host copies the page.
func (g *gatherPlan) source(rt *vkrt, p []byte) int {
	a := uintptr(unsafe.Pointer(&p[0]))
	if a%4 != 0 {
		return -1
	}
	for q, x := range g.held {
		if a >= x.base && a+PageSize <= x.base+x.size {
			return q
		}
	}
	for _, m := range g.miss {
		if a >= m[0] && a < m[1] {
			return -1
		}
	}
	if len(g.held) >= gatherSources*gatherGroups {
		return -1
	}
	im, lo, hi := rt.holdForGather(p)
	if im == nil {
		if hi > lo {
			g.miss = append(g.miss, [2]uintptr{lo, hi})
		}
		return -1
	}
	g.held = append(g.held, im)
	return len(g.held) - 1
}

// holdForGather returns the import holding mem, held for a round (done
// lets it go), when it can be a gather source; otherwise nil and the
// pinned range holding mem if there is one, whose import it starts (the
// next GETs from it are then gathered).
func (r *vkrt) holdForGather(mem []byte) (im *vkImport, lo, hi uintptr) {
	r.mu.Lock()
	defer r.mu.Unlock()
	x := r.holding(mem)
	if x == nil {
		return nil, 0, 0
	}
	if x.buf != nil && x.size <= gatherMaxBind {
		x.users++
		return x, x.base, x.base + x.size
	}
	if x.buf == nil {
		r.startImport(x)
	}
	return nil, x.base, x.base + x.size
}

// vkGet serves d on the GPU where d.Dst lies in an imported mapping (see
// above). It reports false, having done nothing, where it does not apply:
// Decompress's usual path then serves d.
func (b *Backend) vkGet(ctx context.Context, d *pagefmt.Decompression) (bool, error) {
	rt, n := b.vk, len(d.Src)
	if rt.gather == nil || n == 0 || n > maxRound {
		return false, nil
	}
	dst, doff := rt.lookup(d.Dst)
	if dst == nil {
		return false, nil
	}
	defer rt.done(dst)
	if doff%4 != 0 {
		return false, nil
	}
	g := gatherPlans.Get().(*gatherPlan)
	defer gatherPlans.Put(g)
	g.reset(n)
	defer func() {
		for _, im := range g.held {
			rt.done(im)
		}
		clear(g.held)
	}()
	pg, tp := &rt.prof.get, time.Now()
	gathered, acc := 0, 0
	for i := range d.Src {
		s := &d.Src[i]
		q := -1
		switch {
		case s.Class == pagefmt.ClassLZ4:
			g.lz = append(g.lz, i)
			gathered++
			continue
		case s.Class == pagefmt.ClassRaw && len(s.Data) == PageSize:
			// rt.gatherShare percent of them go to the GPU, spread
			// evenly; the host copies the rest meanwhile.
			if acc += rt.gatherShare; acc >= 100 {
				acc -= 100
				q = g.source(rt, s.Data)
			}
		}
		if q < 0 {
			g.host = append(g.host, i)
			continue
		}
		g.srcOf[i] = int32(q)
		g.group[q/gatherSources] = append(g.group[q/gatherSources], i)
		gathered++
	}
	if gathered == 0 {
		return false, nil
	}
	if err := b.usable(); err != nil {
		return false, nil // Decompress's own path says so, or serves the host's pages
	}
	pg.add(pStage, &tp)
	var s *dslot
	select {
	case s = <-b.dslots:
	case <-b.gone:
		return true, errClosed
	}
	defer func() { s.used = time.Now(); b.dslots <- s }()
	pg.add(pSlot, &tp)
	if err := b.usable(); err != nil {
		return true, err
	}
	if err := b.vkGather(ctx, s, d, g, dst.buf, doff, tp); err != nil {
		return true, b.fail(err)
	}
	rt.nGathered.Add(int64(gathered - len(g.lz)))
	return true, ctx.Err()
}

// vkGather runs a planned vkGet on slot s: dstBuf holds d.Dst at doff.
func (b *Backend) vkGather(ctx context.Context, s *dslot, d *pagefmt.Decompression, g *gatherPlan, dstBuf *vk.Buffer, doff int64, tp time.Time) error {
	rt, v, n, nl := b.vk, s.vs, len(d.Src), len(g.lz)
	total := blocksBytes(d, g.lz)
	if err := v.growGather(rt, n, total); err != nil {
		return err
	}
	pg := &rt.prof.get
	pg.rounds.Add(1)
	pg.pages.Add(int64(n))
	gm := v.gm.mem
	var last vk.Ticket // the kernel queue's last: it finishes in order
	var copied vk.Ticket
	// Whatever happens, nothing of the slot's, the sources' or the
	// destination's memory is left to the device once this returns.
	defer func() {
		rt.d.Wait(copied, rt.wait)
		rt.d.Wait(last, rt.wait)
	}()
	// The destination is bound from a 256-aligned offset (any device's
	// binding alignment); pages are addressed in words from it.
	dbase := doff &^ 255
	dw := uint32((doff - dbase) / 4)
	dsize := doff - dbase + int64(n*PageSize)
	ro := gmGroupsOff(v.gcap)
	sets, sizes := g.sets[:0], g.sizes[:0]
	defer func() { g.sets, g.sizes = sets, sizes }()
	for gi, pages := range g.group {
		if len(pages) == 0 {
			continue
		}
		m := len(pages)
		for k, i := range pages {
			e := gm[ro+16*k:]
			q := int(g.srcOf[i])
			how := uint32(q % gatherSources)
			if d.Src[i].Check {
				how |= 0x100
			}
			at := uint32((uintptr(unsafe.Pointer(&d.Src[i].Data[0])) - g.held[q].base) / 4)
			binary.LittleEndian.PutUint32(e, how)
			binary.LittleEndian.PutUint32(e[4:], at)
			binary.LittleEndian.PutUint32(e[8:], dw+uint32(i*PageSize/4))
			binary.LittleEndian.PutUint32(e[12:], d.Src[i].Sum)
		}
		po := gmParamsOff(v.gcap) + 256*gi
		binary.LittleEndian.PutUint32(gm[po:], uint32(m))
		k, set := rt.gather, v.set*gatherGroups+gi
		for x := range gatherSources {
			var err error
			if q := gi*gatherSources + x; q < len(g.held) {
				err = k.BindSet(set, x, g.held[q].buf, 0, g.held[q].buf.Size)
			} else { // unused: any valid range
				err = k.BindSet(set, x, v.gm.buf, 0, 16)
			}
			if err != nil {
				return err
			}
		}
		for x, bd := range []struct {
			buf       *vk.Buffer
			off, size int64
		}{{v.gm.buf, int64(ro), int64(20 * m)}, {dstBuf, dbase, dsize}, {v.gm.buf, int64(po), 16}} {
			if err := k.BindSet(set, gatherSources+x, bd.buf, bd.off, bd.size); err != nil {
				return err
			}
		}
		sets, sizes = append(sets, set), append(sizes, m)
		ro += (20*m + 255) &^ 255
	}
	if len(sets) > 0 {
		t, err := rt.gather.DispatchSets(sets, sizes, vk.Ticket{})
		if err != nil {
			return err
		}
		last = t
	}
	pg.add(pSubmit, &tp)
	if nl > 0 {
		// The LZ4 blocks, then where each page goes (in words of the
		// destination's binding) behind their descriptors.
		dr := gDescRoom(v.gcap)
		in := v.gin.mem
		packBlocks(in[:8*nl], in[dr:], d, g.lz) // checks their sums
		for k, i := range g.lz {
			binary.LittleEndian.PutUint32(in[8*nl+4*k:], dw+uint32(i*PageSize/4))
			if d.Corrupt[i] {
				// A block whose sum is wrong is not decoded into the
				// client's page: with no bytes it fails at once.
				binary.LittleEndian.PutUint32(in[8*k+4:], 0)
			}
		}
		binary.LittleEndian.PutUint32(gm, uint32(nl))
		binary.LittleEndian.PutUint32(gm[4:], 1) // placed
		pg.add(pPack, &tp)
		src := v.gin.buf
		if v.gdin != nil {
			var err error
			copied, err = rt.d.Copy(v.gdin, v.gin.buf, []vk.Region{{Src: 0, Dst: 0, Size: int64(12 * nl)},
				{Src: int64(dr), Dst: int64(dr), Size: int64(total)}}, vk.Ticket{})
			if err != nil {
				return err
			}
			src = v.gdin
		}
		k := rt.decomp
		for i, x := range []struct {
			buf       *vk.Buffer
			off, size int64
		}{{src, int64(dr), int64(max(total, 4))}, {src, 0, int64(12 * nl)}, {dstBuf, dbase, dsize},
			{v.gm.buf, gmStatusOff, int64(4 * nl)}, {v.gm.buf, 0, 16}} {
			if err := k.BindSet(v.set, i, x.buf, x.off, x.size); err != nil {
				return err
			}
		}
		t, err := k.DispatchSet(v.set, nl, 1, 1, copied)
		if err != nil {
			return err
		}
		last = t
		pg.add(pSubmit, &tp)
	}
	pg.gpu.enter()
	plainPages(d, g.host) // the host's share while the GPU works
	pg.add(pOther, &tp)
	err := rt.d.Wait(last, rt.wait)
	pg.gpu.leave()
	if err == nil {
		err = faultLost()
	}
	if err != nil {
		return err
	}
	pg.add(pWait, &tp)
	defer pg.add(pDeliver, &tp)
	for j, i := range g.lz {
		d.Failed[i] = d.Corrupt[i] || binary.LittleEndian.Uint32(gm[gmStatusOff+4*j:]) == 0
	}
	ro = gmGroupsOff(v.gcap)
	for _, pages := range g.group {
		if len(pages) == 0 {
			continue
		}
		st := gm[ro+16*len(pages):]
		for k, i := range pages {
			if binary.LittleEndian.Uint32(st[4*k:]) == 0 {
				d.Corrupt[i], d.Failed[i] = true, true // its sum did not match: not written
			}
			d.Src[i].Check = false // checked (pagefmt.Decompression.CheckSums)
		}
		ro += (20*len(pages) + 255) &^ 255
	}
	return ctx.Err()
}

// gDescRoom is the room for cap blocks' descriptors and places (12 bytes
// a block), before the blocks.
func gDescRoom(capPages int) int { return (12*capPages + 255) &^ 255 }

// growGather makes the slot's gather buffers hold n pages with total
// bytes of LZ4 blocks: the blocks (and their device copy on a discrete
// GPU) and the metadata.
func (v *vkDSlot) growGather(rt *vkrt, n, total int) error {
	if n <= v.gcap && total <= v.gsrcCap {
		return nil
	}
	v.freeGather()
	c, sc := slotCaps(n, total)
	var err error
	if v.gin, v.gdin, err = rt.newBlocksBuf(gDescRoom(c), sc); err != nil {
		return err
	}
	if v.gm, err = rt.newHostBuf(gmSize(c)); err != nil {
		v.freeGather()
		return err
	}
	v.gcap, v.gsrcCap = c, sc
	return nil
}

func (v *vkDSlot) freeGather() {
	v.gin.free()
	v.gm.free()
	if v.gdin != nil {
		v.gdin.Release()
	}
	v.gin, v.gm, v.gdin, v.gcap, v.gsrcCap = nil, nil, nil, 0, 0
}

// envNoGather keeps GETs off the gather kernel (A/B measurements).
const envNoGather = "S4D_VULKAN_NO_GATHER"

// envGatherShare sets gatherShare. On an H200 the gather kernel alone
// moved raw pages at 19.7-20.5 GB/s and the host's copies (16 cores) at
// 30-36 (BenchmarkVulkanGather): the two together beat either.
const (
	envGatherShare     = "S4D_VULKAN_GATHER_SHARE"
	defaultGatherShare = 40
)

// setupGather builds the gather kernel from set's module and reads its
// settings; where it cannot, gatherNote says why GETs are not gathered.
func (r *vkrt) setupGather(set spirv.Set) {
	r.gatherShare = defaultGatherShare
	if v, err := strconv.Atoi(os.Getenv(envGatherShare)); err == nil && v >= 0 && v <= 100 {
		r.gatherShare = v
	}
	switch {
	case os.Getenv(envNoGather) == "1":
		r.gatherNote = envNoGather + "=1"
	case len(set.Gather) == 0:
		r.gatherNote = "no gather module"
	default:
		kinds := make([]int, 0, gatherSources+3)
		for range gatherSources + 2 {
			kinds = append(kinds, vk.Storage)
		}
		var err error
		if r.gather, err = r.d.NewKernel(set.Gather, set.GatherEntry, append(kinds, vk.Uniform)...); err != nil {
			r.gatherNote = err.Error()
		}
	}
}
