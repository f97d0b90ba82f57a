package webgpu

import (
	"errors"
	"sync"

	"github.com/s4d-project/s4d/pagefmt"
)

// parts hands a batch's rounds to the caller's deliver in order (the
// PartCompressor contract), each straight from its slot's mapped readback:
// round r waits for round r-1 to be delivered (or to have failed), holding
// its slot meanwhile.
type parts struct {
	deliver func(int, *pagefmt.Compressed) error
	done    []chan struct{} // closed once round r is delivered or failed
	once    []sync.Once
	mu      sync.Mutex
	next    int   // the round to deliver next
	err     error // the first error deliver returned
}

var errEarlierRound = errors.New("webgpu: an earlier round of the batch failed")

// deliverError carries deliver's error out of a round: it ends the batch
// but says nothing about the backend.
type deliverError struct{ err error }

func (e deliverError) Error() string { return e.err.Error() }

func newParts(rounds int, deliver func(int, *pagefmt.Compressed) error) *parts {
	p := &parts{deliver: deliver, done: make([]chan struct{}, rounds), once: make([]sync.Once, rounds)}
	for r := range p.done {
		p.done[r] = make(chan struct{})
	}
	return p
}

// release marks round r over (delivered or failed). Nil p: no parts.
func (p *parts) release(r int) {
	if p != nil {
		p.once[r].Do(func() { close(p.done[r]) })
	}
}

// releaseAll lets every waiting round go (the batch is over).
func (p *parts) releaseAll() {
	for r := range p.done {
		p.release(r)
	}
}

// deliverRound fills the round's metadata into a part whose Data is the
// slot's mapped packed bytes, waits for the previous round, and delivers.
func (p *parts) deliverRound(b *Backend, s *slot, r, lo int, limit uint32) error {
	defer p.release(r)
	part := &s.part
	part.Reset(s.n)
	part.Sum = pagefmt.Resize(part.Sum, s.n)
	if err := b.fill(s, part, 0, 0, len(s.data), limit); err != nil {
		return err
	}
	part.Data = s.data
	if r > 0 {
		<-p.done[r-1]
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.err != nil {
		return deliverError{p.err}
	}
	if r != p.next {
		// An earlier round failed: the batch is void, and parts must not
		// skip pages.
		return errEarlierRound
	}
	if err := p.deliver(lo, part); err != nil {
		p.err = err
		return deliverError{err}
	}
	p.next++
	return nil
}
