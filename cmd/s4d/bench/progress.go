package bench

import (
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/term"
)

// progress draws one status line on a terminal once a run has lasted a
// couple of seconds; short runs and redirected output get nothing, so logs
// and pipes stay clean.
type progress struct {
	w     io.Writer // nil: draw nothing
	start time.Time
	done  atomic.Int64
	total atomic.Int64
	label atomic.Pointer[string]
	stop  chan struct{}
	once  sync.Once
	wg    sync.WaitGroup
}

// isTerminal reports whether fd is a terminal.
func isTerminal(fd uintptr) bool { return term.IsTerminal(int(fd)) }

// newProgress starts drawing on w if w is non-nil; call end when done.
func newProgress(w io.Writer) *progress {
	p := &progress{w: w, start: time.Now(), stop: make(chan struct{})}
	if w == nil {
		return p
	}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		drawn := false
		for {
			select {
			case <-p.stop:
				if drawn {
					fmt.Fprint(p.w, "\r\033[K")
				}
				return
			case <-tick.C:
				if time.Since(p.start) < 2*time.Second {
					continue
				}
				l, d, t := p.label.Load(), p.done.Load(), p.total.Load()
				if l == nil || t == 0 {
					continue
				}
				fmt.Fprintf(p.w, "\r\033[K%s: %d/%d pages (%.0f%%)", *l, d, t, 100*float64(d)/float64(t))
				drawn = true
			}
		}
	}()
	return p
}

// phase starts counting a new step of total pages.
func (p *progress) phase(label string, total int64) {
	p.label.Store(&label)
	p.done.Store(0)
	p.total.Store(total)
}

func (p *progress) add(n int64) { p.done.Add(n) }

// end erases the line and stops drawing; later calls do nothing.
func (p *progress) end() {
	p.once.Do(func() { close(p.stop) })
	p.wg.Wait()
}
