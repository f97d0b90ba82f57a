package ipc

import (
	"net"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func socketPair(t *testing.T) (*Socket, *Socket) {
	t.Helper()
	ln, err := net.Listen("unix", filepath.Join(t.TempDir(), "s"))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	done := make(chan net.Conn)
	go func() {
		c, _ := ln.Accept()
		done <- c
	}()
	a, err := net.Dial("unix", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	b := <-done
	sa, err := NewSocket(a.(*net.UnixConn), -1)
	if err != nil {
		t.Fatal(err)
	}
	sb, err := NewSocket(b.(*net.UnixConn), -1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sa.Close(); sb.Close() })
	return sa, sb
}

// recvOne waits for one byte however long it takes to come.
func recvOne(s *Socket, deadline time.Time) error {
	var b [1]byte
	for {
		_, _, err := s.Recvmsg(b[:], nil)
		if err != unix.EAGAIN {
			return err
		}
		if err := s.Wait(false, deadline); err != nil {
			return err
		}
	}
}

// Bytes that come while a wait moves from poll(2) to the runtime's poller,
// or after, are never missed.
func TestSocketWaits(t *testing.T) {
	a, b := socketPair(t)
	a.hot = 300 * time.Microsecond // so that many waits reach the runtime's poller
	for i := range 300 {
		delay := time.Duration(i%7) * 100 * time.Microsecond
		go func() {
			time.Sleep(delay)
			b.Send([]byte{byte(i)})
		}()
		if err := recvOne(a, time.Now().Add(5*time.Second)); err != nil {
			t.Fatalf("byte %d (sent after %v): %v", i, delay, err)
		}
	}
}

func TestSocketDeadlineAndInterrupt(t *testing.T) {
	a, _ := socketPair(t)
	for _, hot := range []time.Duration{time.Hour, time.Microsecond} { // in poll(2), in the runtime's poller
		a.hot = hot
		t0 := time.Now()
		if err := recvOne(a, t0.Add(20*time.Millisecond)); err == nil || time.Since(t0) < 20*time.Millisecond {
			t.Fatalf("hot %v: deadline: %v after %v", hot, err, time.Since(t0))
		}
		done := make(chan struct{})
		go func() {
			time.Sleep(10 * time.Millisecond)
			a.Interrupt()
			close(done)
		}()
		if err := recvOne(a, time.Time{}); err != ErrInterrupted {
			t.Fatalf("hot %v: interrupt: %v", hot, err)
		}
		// As the client does: resume only once Interrupt has returned, or
		// its last step (cutting short a parked wait) may hit the next wait.
		<-done
		a.Resume()
	}
}

// BenchmarkSocketStream is the ceiling of any reply through the socket:
// 64 MiB written in 1 MiB pieces by one goroutine and read by another
// over a Unix socket pair, the kernel copying every byte twice (into the
// socket and out of it). BenchmarkMemcpy is one copy of the same bytes.
func BenchmarkSocketStream(b *testing.B) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		b.Fatal(err)
	}
	defer unix.Close(fds[0])
	defer unix.Close(fds[1])
	const size, piece = 64 << 20, 1 << 20
	src, dst := make([]byte, size), make([]byte, size)
	b.SetBytes(size)
	for b.Loop() {
		done := make(chan error, 1)
		go func() {
			for off := 0; off < size; {
				n, err := unix.Write(fds[0], src[off:min(off+piece, size)])
				if err != nil {
					done <- err
					return
				}
				off += n
			}
			done <- nil
		}()
		for got := 0; got < size; {
			n, err := unix.Read(fds[1], dst[got:])
			if err != nil {
				b.Fatal(err)
			}
			got += n
		}
		if err := <-done; err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkMemcpy(b *testing.B) {
	const size = 64 << 20
	src, dst := make([]byte, size), make([]byte, size)
	b.SetBytes(size)
	for b.Loop() {
		copy(dst, src)
	}
}
