package vk

/*
#include "glue.h"
*/
import "C"

import (
	"errors"
	"fmt"
)

// Batch is the work of one submission to the compute queue: copies and
// dispatches in the order added. A dispatch waits for the copies added
// before it; dispatches added before a copy do not hold the copy up, nor
// it them. One submission instead of a copy on the transfer queue and a
// dispatch waiting for it there: no semaphore between queues (a waiting
// NVIDIA queue stalls), and a third of a GET round's submissions.
// A Batch may be reused after Reset.
type Batch struct {
	ops  []C.s4dvk_op
	sets []C.int32_t
	xs   []C.uint32_t
	regs []C.VkBufferCopy
	err  error
}

// Reset empties b for reuse, keeping its memory.
func (b *Batch) Reset() {
	b.ops, b.sets, b.xs, b.regs, b.err = b.ops[:0], b.sets[:0], b.xs[:0], b.regs[:0], nil
}

// Len is how many steps b holds.
func (b *Batch) Len() int { return len(b.ops) }

// Copy adds a copy of the regions from src to dst; a region outside
// either buffer makes the batch fail at Submit.
func (b *Batch) Copy(dst, src *Buffer, regions ...Region) {
	first := len(b.regs)
	for i, r := range regions {
		if r.Src < 0 || r.Dst < 0 || r.Size <= 0 || r.Src+r.Size > src.Size || r.Dst+r.Size > dst.Size {
			b.err = cmpErr(b.err, fmt.Errorf("vulkan: copy region %d (%d -> %d, %d bytes) outside the buffers (%d, %d bytes)", i, r.Src, r.Dst, r.Size, src.Size, dst.Size))
			return
		}
		b.regs = append(b.regs, C.VkBufferCopy{srcOffset: C.VkDeviceSize(r.Src), dstOffset: C.VkDeviceSize(r.Dst), size: C.VkDeviceSize(r.Size)})
	}
	if n := len(b.regs) - first; n > 0 {
		b.ops = append(b.ops, C.s4dvk_op{src: src.buf, dst: dst.buf, first: C.uint32_t(first), n: C.uint32_t(n)})
	}
}

// Dispatch adds x workgroups of k with descriptor set set. Dispatches of
// one kernel added one after the other may run at once.
func (b *Batch) Dispatch(k *Kernel, set, x int) {
	if set < 0 || set >= Sets || x <= 0 {
		b.err = cmpErr(b.err, fmt.Errorf("vulkan: dispatch with set %d, %d workgroups", set, x))
		return
	}
	if n := len(b.ops); n > 0 && b.ops[n-1].k == k.k {
		b.ops[n-1].n++
	} else {
		b.ops = append(b.ops, C.s4dvk_op{k: k.k, first: C.uint32_t(len(b.sets)), n: 1})
	}
	b.sets, b.xs = append(b.sets, C.int32_t(set)), append(b.xs, C.uint32_t(x))
}

func cmpErr(old, err error) error {
	if old != nil {
		return old
	}
	return err
}

// Submit submits b on the compute queue after after.
func (d *Device) Submit(b *Batch, after Ticket) (Ticket, error) {
	if b.err != nil {
		return Ticket{}, b.err
	}
	if len(b.ops) == 0 {
		return Ticket{}, errors.New("vulkan: an empty batch")
	}
	if d.copyQ {
		return d.submitSplit(b, after)
	}
	return d.submitOps(b, after)
}

func (d *Device) submitOps(b *Batch, after Ticket) (Ticket, error) {
	// C reads the arrays only during the call; none holds a Go pointer.
	sets, xs, regs := b.sets, b.xs, b.regs
	if len(sets) == 0 {
		sets = []C.int32_t{0}
		xs = []C.uint32_t{0}
	}
	if len(regs) == 0 {
		regs = []C.VkBufferCopy{{}}
	}
	t, err := d.submit(C.S4DVK_KERNEL, after, func(i C.int, av C.uint64_t) C.VkResult {
		return C.s4dvk_record_ops(d.d, i, &b.ops[0], C.uint32_t(len(b.ops)), &sets[0], &xs[0], &regs[0], av)
	})
	if err != nil {
		return Ticket{}, fmt.Errorf("vulkan: submit: %w", err)
	}
	return t, nil
}

// submitSplit submits b's copies on the transfer queue and its
// dispatches after them on the compute queue, as before batches
// (S4D_VULKAN_COPYQ=1, for comparison).
func (d *Device) submitSplit(b *Batch, after Ticket) (Ticket, error) {
	var rest Batch
	for _, op := range b.ops {
		if op.k != nil {
			rest.ops = append(rest.ops, op)
			continue
		}
		regs := b.regs[op.first : op.first+op.n]
		t, err := d.submit(C.S4DVK_COPY, after, func(i C.int, av C.uint64_t) C.VkResult {
			return C.s4dvk_record_copy(d.d, i, op.src, op.dst, &regs[0], op.n, av)
		})
		if err != nil {
			return Ticket{}, fmt.Errorf("vulkan: copy: %w", err)
		}
		after = t
	}
	if len(rest.ops) == 0 {
		return after, nil
	}
	rest.sets, rest.xs = b.sets, b.xs
	return d.submitOps(&rest, after)
}
