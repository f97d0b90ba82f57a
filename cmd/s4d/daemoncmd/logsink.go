package daemoncmd

import (
	"fmt"
	"io"
	"sync"
	"time"
)

// logSink is the daemon's log output: a write never waits for the
// reader. A daemon serving swap must not wait on its own log: the reader
// (journald, or a file on tmpfs) may have its pages on the daemon's swap
// device, and a thread of the daemon blocked in that write, holding the
// log's lock, stalls every other thread that logs, the swap device's own
// among them. Seen in the guest: a daemon thread in write(2) on its log,
// waiting for a swap-in from its own device. Lines go to a buffer of
// fixed size, written out by a goroutine of their own; lines that find
// it full are counted and dropped, and the count is logged once it is
// written again.
type logSink struct {
	out  io.Writer
	mu   sync.Mutex
	buf  []byte // lines waiting, at most cap(buf) bytes
	lost int    // lines dropped since the last write
	shut bool
	wake chan struct{}
	done chan struct{}
}

func newLogSink(out io.Writer, size int) *logSink {
	s := &logSink{out: out, buf: make([]byte, 0, size), wake: make(chan struct{}, 1), done: make(chan struct{})}
	go s.run(make([]byte, 0, size))
	return s
}

// Write takes a whole line (slog writes one per call) or drops it.
func (s *logSink) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.shut {
		return s.out.Write(p)
	}
	if len(s.buf)+len(p) > cap(s.buf) {
		s.lost++
	} else {
		s.buf = append(s.buf, p...)
	}
	select {
	case s.wake <- struct{}{}:
	default:
	}
	return len(p), nil
}

// run writes out what is waiting, two buffers taking turns, until Close.
func (s *logSink) run(spare []byte) {
	defer close(s.done)
	for {
		_, more := <-s.wake
		s.mu.Lock()
		full, lost := s.buf, s.lost
		s.buf, s.lost = spare[:0], 0
		s.mu.Unlock()
		if lost > 0 {
			fmt.Fprintf(s.out, "time=%s level=WARN msg=\"log lines dropped: the log was not read in time\" lines=%d\n",
				time.Now().UTC().Format(time.RFC3339Nano), lost)
		}
		s.out.Write(full)
		spare = full
		if !more {
			return
		}
	}
}

// Close writes out what is waiting, for at most wait, and makes later
// writes go straight out.
func (s *logSink) Close(wait time.Duration) {
	s.mu.Lock()
	if !s.shut {
		s.shut = true
		close(s.wake)
	}
	s.mu.Unlock()
	select {
	case <-s.done:
	case <-time.After(wait):
	}
}
