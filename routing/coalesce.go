package routing

import (
	"context"
	"sync"
	"time"

	"github.com/s4d-project/s4d/pagefmt"
)

// meter estimates a rate of pages per second over 100 ms windows.
type meter struct {
	mu    sync.Mutex
	start time.Time
	pages int
	rate  float64
}

// add counts n pages and returns the rate of the last full window.
func (m *meter) add(n int) float64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := time.Now()
	if el := now.Sub(m.start); el >= 100*time.Millisecond {
		m.rate = float64(m.pages) / el.Seconds()
		m.start, m.pages = now, 0
	}
	m.pages += n
	return m.rate
}

// A waiter is one small batch waiting to travel with others.
type waiter struct {
	pages []byte
	out   *pagefmt.Compressed
	done  chan merged
}

type merged struct {
	backend string
	err     error
}

// merge hands a small batch to the coalescer and waits for its share of
// the merged result.
func (r *Router) merge(ctx context.Context, pages []byte, out *pagefmt.Compressed) (string, error) {
	w := &waiter{pages: pages, out: out, done: make(chan merged, 1)}
	queued := false
	r.qmu.RLock()
	if !r.closed {
		select {
		case r.queue <- w:
			queued = true
		default:
		}
	}
	r.qmu.RUnlock()
	if !queued {
		// The coalescer is saturated or closed: go alone rather than wait.
		return r.compressBatch(ctx, &pagefmt.Batch{PageSize: r.pageSize, Pages: pages}, out, nil)
	}
	m := <-w.done
	return m.backend, m.err
}

// coalesce gathers waiting batches until maxPages are together or the
// first has waited r.wait, then compresses them as one batch. It ends
// once Close has closed the queue and the batches in it are on their way.
func (r *Router) coalesce(maxPages int) {
	defer r.groups.Done()
	for first := range r.queue {
		group := []*waiter{first}
		n := len(first.pages) / r.pageSize
		timer := time.NewTimer(r.wait)
	collect:
		for n < maxPages {
			select {
			case w, ok := <-r.queue:
				if !ok {
					break collect
				}
				group = append(group, w)
				n += len(w.pages) / r.pageSize
			case <-timer.C:
				break collect
			}
		}
		timer.Stop()
		r.groups.Add(1)
		go r.runGroup(group, n)
	}
}

// Close stops merging: later small batches go alone, and it returns once
// the coalescer and the merged batches it started have finished. Call it
// before the backends close.
func (r *Router) Close() {
	r.below.Store(0)
	r.qmu.Lock()
	if !r.closed && r.queue != nil {
		close(r.queue)
	}
	r.closed = true
	r.qmu.Unlock()
	r.groups.Wait()
}

// runGroup compresses a group and gives each waiter its pages' results,
// its compressed bytes copied into its own Data so that nothing is shared
// once the waiters go their ways.
func (r *Router) runGroup(group []*waiter, n int) {
	defer r.groups.Done()
	pages := make([]byte, 0, n*r.pageSize)
	for _, w := range group {
		pages = append(pages, w.pages...)
	}
	var all pagefmt.Compressed
	name, err := r.compressBatch(context.Background(), &pagefmt.Batch{PageSize: r.pageSize, Pages: pages}, &all, nil)
	at := 0
	for _, w := range group {
		k := len(w.pages) / r.pageSize
		if err == nil {
			o := w.out
			o.Class = append(o.Class[:0], all.Class[at:at+k]...)
			o.Fill = append(o.Fill[:0], all.Fill[at:at+k]...)
			o.Size = append(o.Size[:0], all.Size[at:at+k]...)
			o.Off = append(o.Off[:0], all.Off[at:at+k]...)
			o.Sum = o.Sum[:0]
			if len(all.Sum) == len(all.Class) {
				o.Sum = append(o.Sum, all.Sum[at:at+k]...)
			}
			o.Data = o.Data[:0]
			for j := range k {
				if c := o.Class[j]; c == pagefmt.ClassLZ4 || c == pagefmt.ClassZstd {
					off := all.Off[at+j]
					o.Off[j] = uint32(len(o.Data))
					o.Data = append(o.Data, all.Data[off:off+o.Size[j]]...)
				}
			}
		}
		at += k
		w.done <- merged{name, err}
	}
}
