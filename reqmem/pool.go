// Package reqmem is the memory of requests in flight: large buffers kept
// for reuse between requests (mappings of their own, off the Go heap), and
// the budget that bounds what requests may hold at once, in all and per
// user.
package reqmem

import (
	"math/bits"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/s4d-project/s4d/pagefmt"
)

// spares keeps a few values of one kind for reuse. Unlike a sync.Pool it
// survives garbage collections, which would otherwise hand every large
// batch fresh memory to fault in and zero (a 16 MiB body costs 4096 page
// faults); a value left unused for between one and two sweeps is dropped,
// so an idle daemon gives the memory back.
type spares[T any] struct {
	mu       sync.Mutex
	max      int // spares kept at most
	new, old []T // put back since the last sweep, and before it
}

func (s *spares[T]) get() (v T, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, l := range []*[]T{&s.new, &s.old} {
		if n := len(*l); n > 0 {
			v = (*l)[n-1]
			clear((*l)[n-1:])
			*l = (*l)[:n-1]
			return v, true
		}
	}
	return v, false
}

// put keeps v unless enough are kept already (false).
func (s *spares[T]) put(v T) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.new)+len(s.old) < s.max {
		s.new = append(s.new, v)
		return true
	}
	return false
}

// sweep drops what was not used since the last sweep and returns the
// bytes it held, as drop (which frees a value) counts them.
func (s *spares[T]) sweep(drop func(T) int) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, v := range s.old {
		n += drop(v)
	}
	clear(s.old)
	s.old, s.new = append(s.old[:0], s.new...), s.new[:0]
	clear(s.new[len(s.new):cap(s.new)])
	return n
}

// Buffers of 64 KiB and more come in four size classes per power of two,
// so a batch of 2^k pages does not take a buffer twice its size.
const (
	minBufShift = 16
	bufClasses  = 4 * (31 - minBufShift)
)

// bufClass returns the class of an n-byte buffer and the class's size.
func bufClass(n int) (int, int) {
	if n <= 1<<minBufShift {
		return 0, 1 << minBufShift
	}
	k := bits.Len(uint(n-1)) - 1 // 2^k < n <= 2^(k+1)
	step := 1 << (k - 2)
	q := (n - 1<<k + step - 1) / step // 1..4
	return (k-minBufShift)*4 + q, 1<<k + q*step
}

// Pool hands out large byte buffers (request bodies, responses,
// scratch) and the compression outputs, kept between requests. The byte
// buffers are anonymous mappings of their own, off the Go heap: only the
// pages written become resident, so a body buffer costs what has arrived
// of the body, not the length its header claims, and a dropped buffer goes
// back to the kernel at once instead of waiting for a collection.
type Pool struct {
	bytes   [bufClasses + 1]spares[[]byte]
	outs    spares[*pagefmt.Compressed]
	kept    atomic.Int64 // bytes of mapped buffers kept as spares
	keepMax int64
}

// Up to this many of each are kept: as many as busy connections use at
// once, or each request beyond that faults in fresh memory and grows its
// output piece by piece (with 8 clients and 4 kept, a sixth of the daemon's
// CPU time in a profile of GPU PUTs on the H100). What is kept is bounded
// by the peak in use, and goes within two sweeps once idle.
const sparesKept = 16

// NewPool keeps at most keepMax bytes of buffers for reuse.
func NewPool(keepMax int64) *Pool {
	p := &Pool{keepMax: keepMax}
	for i := range p.bytes {
		p.bytes[i].max = sparesKept
	}
	p.outs.max = sparesKept
	return p
}

// Get returns a buffer of n bytes (contents undefined).
func (p *Pool) Get(n int) []byte {
	c, size := bufClass(n)
	if c >= len(p.bytes) {
		return make([]byte, n)
	}
	if b, ok := p.bytes[c].get(); ok {
		p.kept.Add(-int64(cap(b)))
		return b[:n]
	}
	b, err := unix.Mmap(-1, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_NORESERVE)
	if err != nil {
		return make([]byte, n, size) // put tells the two apart: unmapping it fails
	}
	return b[:n]
}

// Put gives back a buffer from Get; nothing may use it afterwards.
func (p *Pool) Put(b []byte) {
	c, size := bufClass(cap(b))
	if c < len(p.bytes) && size == cap(b) && p.kept.Add(int64(size)) <= p.keepMax {
		if p.bytes[c].put(b[:0]) {
			return
		}
	}
	if c < len(p.bytes) && size == cap(b) {
		p.kept.Add(-int64(size))
	}
	unmap(b)
}

// unmap frees a buffer from Get (one of the heap goes to the collector).
func unmap(b []byte) int {
	unix.Munmap(b[:cap(b)])
	return cap(b)
}

// GetOut returns a compression output kept for reuse.
func (p *Pool) GetOut() *pagefmt.Compressed {
	if c, ok := p.outs.get(); ok {
		return c
	}
	return new(pagefmt.Compressed)
}

// PutOut gives back an output from GetOut.
func (p *Pool) PutOut(c *pagefmt.Compressed) { p.outs.put(c) }

// Sweep drops what was not used since the last sweep and returns about
// how many bytes of the Go heap that let go, and how many mapped bytes it
// unmapped.
func (p *Pool) Sweep() (heap, unmapped int) {
	for i := range p.bytes {
		n := p.bytes[i].sweep(unmap)
		p.kept.Add(-int64(n))
		unmapped += n
	}
	return p.outs.sweep(func(c *pagefmt.Compressed) int { return cap(c.Data) }), unmapped
}
