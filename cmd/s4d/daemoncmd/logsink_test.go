package daemoncmd

import (
	"bytes"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

// blockingWriter holds every write until released, like a log reader
// that has stopped reading.
type blockingWriter struct {
	mu      sync.Mutex
	out     bytes.Buffer
	release chan struct{}
	entered chan struct{}
}

func (w *blockingWriter) Write(p []byte) (int, error) {
	select {
	case w.entered <- struct{}{}:
	default:
	}
	<-w.release
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.out.Write(p)
}

// A stalled reader never stalls the writers: lines past the buffer are
// dropped and counted, the rest come out in order once it reads again.
func TestLogSinkNeverWaits(t *testing.T) {
	w := &blockingWriter{release: make(chan struct{}), entered: make(chan struct{}, 1)}
	s := newLogSink(w, 1000)
	fmt.Fprintf(s, "line %03d\n", 0)
	<-w.entered // the writer goroutine is now stuck in the reader
	done := make(chan struct{})
	go func() {
		for i := 1; i <= 300; i++ {
			fmt.Fprintf(s, "line %03d\n", i)
		}
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("a write waited for the stalled reader")
	}
	close(w.release)
	s.Close(10 * time.Second)
	got := w.out.String()
	lines := strings.Split(strings.TrimSpace(got), "\n")
	// 1000 bytes hold 111 lines of 9: 190 of the 300 dropped.
	if !strings.Contains(got, "lines=189") && !strings.Contains(got, "lines=190") {
		t.Fatalf("no count of the dropped lines:\n%s", got)
	}
	last := -1
	for _, l := range lines {
		var n int
		if _, err := fmt.Sscanf(l, "line %d", &n); err != nil {
			continue
		}
		if n <= last {
			t.Fatalf("line %d after %d", n, last)
		}
		last = n
	}
	if last < 100 {
		t.Fatalf("last line out %d", last)
	}
	// After Close, writes go straight through.
	fmt.Fprintf(s, "after\n")
	if !strings.HasSuffix(w.out.String(), "after\n") {
		t.Fatal("a write after Close was lost")
	}
}
