package webgpu

// #include "glue.h"
import "C"

import (
	"errors"
	"unsafe"
)

// copyPass moves n pages through slot s's buffers with no compute pass:
// the transfers alone, what a round could reach with an infinitely fast
// kernel (issue 29's ceilings). up stages src (procs goroutines) and
// copies the staging buffer into the device buffer, as a compress round
// does; down copies the device buffer into the readback buffer and out
// into dst, as a decompress round does with its pages. Either alone ends
// with a 16-byte readback, so each pass still costs one round trip. For
// benchmarks.
func (b *Backend) copyPass(s *slot, src, dst []byte, n int, up, down bool, procs int) error {
	d, p := b.d, b.d.p
	if s.uploadPending {
		if err := d.await(s.uploadWait, "staging map"); err != nil {
			return err
		}
	}
	if n > s.capPages {
		if err := d.do(func() error { return b.ensure(s, n) }); err != nil {
			return err
		}
	}
	if up {
		buf, err := b.stage(s, n)
		if err != nil {
			return err
		}
		parallelCopy(buf, src[:n*PageSize], procs)
	}
	size := 16
	if down {
		size = n * PageSize
	}
	err := d.do(func() error {
		C.s4d_push_errors(p, d.dev)
		enc := C.s4d_encoder(p, d.dev)
		if up {
			C.s4d_unmap(p, s.upload)
			s.uploadReady = false
			C.s4d_copy(p, enc, s.upload, 0, s.in, 0, C.uint64_t(n*PageSize))
		}
		if down {
			C.s4d_copy(p, enc, s.in, 0, s.readback, 0, C.uint64_t(size))
		} else {
			C.s4d_copy(p, enc, s.total, 0, s.readback, 0, 16)
		}
		C.s4d_submit(p, d.queue, enc)
		if up {
			resetWait(s.uploadWait)
			C.s4d_map_async(p, s.upload, C.S4D_MAP_WRITE, 0, C.size_t(s.capPages*PageSize), s.uploadWait)
			s.uploadPending = true
		}
		if err := d.popErrors(s.errWait); err != nil {
			return err
		}
		resetWait(s.rbWait)
		C.s4d_map_async(p, s.readback, C.S4D_MAP_READ, 0, C.size_t(size), s.rbWait)
		return nil
	})
	if err != nil {
		return err
	}
	if err := d.await(s.rbWait, "readback"); err != nil {
		return err
	}
	var raw []byte
	err = d.do(func() error {
		if s.rbWait.status != C.S4D_STATUS_SUCCESS {
			return errors.New("webgpu: readback map failed: " + waitMsg(s.rbWait))
		}
		ptr := C.s4d_const_mapped(p, s.readback, 0, C.size_t(size))
		if ptr == nil {
			C.s4d_unmap(p, s.readback)
			return errors.New("webgpu: readback has no mapped range")
		}
		raw = unsafe.Slice((*byte)(ptr), size)
		return nil
	})
	if err != nil {
		return err
	}
	if down {
		parallelCopy(dst[:size], raw, procs)
	}
	return d.do(func() error { C.s4d_unmap(p, s.readback); return d.fault() })
}

// stagedSlice maps slot s's staging buffer for n pages (awaiting a pending
// map first) and returns it, for the host-copy ceiling. For benchmarks.
func (b *Backend) stagedSlice(s *slot, n int) ([]byte, error) {
	if s.uploadPending {
		if err := b.d.await(s.uploadWait, "staging map"); err != nil {
			return nil, err
		}
	}
	if n > s.capPages {
		if err := b.d.do(func() error { return b.ensure(s, n) }); err != nil {
			return nil, err
		}
	}
	return b.stage(s, n)
}
