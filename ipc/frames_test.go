package ipc

import (
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// readerPair returns a FrameReader on one end of a Unix stream pair and
// the other end to write requests into.
func readerPair(t testing.TB, opt ReaderOptions) (*FrameReader, *net.UnixConn) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	conn := func(fd int) *net.UnixConn {
		f := os.NewFile(uintptr(fd), "pair")
		defer f.Close()
		c, err := net.FileConn(f)
		if err != nil {
			t.Fatal(err)
		}
		return c.(*net.UnixConn)
	}
	sock, err := NewSocket(conn(fds[0]), -1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sock.Close() })
	if opt.MaxFrame == 0 {
		opt.MaxFrame = 1 << 20
	}
	if opt.IdleTimeout == 0 {
		opt.IdleTimeout, opt.FrameTimeout = time.Second, time.Second
	}
	if opt.Large == nil {
		opt.Large = func(n int, _ time.Time) ([]byte, error) { return make([]byte, n), nil }
	}
	w := conn(fds[1])
	t.Cleanup(func() { w.Close() })
	return NewFrameReader(sock, opt), w
}

func TestFrameReaderPipelinedAndLarge(t *testing.T) {
	var large int
	r, w := readerPair(t, ReaderOptions{Large: func(n int, _ time.Time) ([]byte, error) { large = n; return make([]byte, n), nil }})
	small := Frame(Header{Version: Version, Op: OpDel, ID: 1}, []byte("abc"))
	big := Frame(Header{Version: Version, Op: OpPut, ID: 2}, make([]byte, ReadBufSize+100))
	go func() { w.Write(append(append(append([]byte{}, small...), big...), small...)) }()
	for i, want := range []struct {
		id  uint64
		len int
	}{{1, 3}, {2, ReadBufSize + 100}, {1, 3}} {
		h, body, fds, err := r.Read()
		if err != nil || h.ID != want.id || len(body) != want.len || len(fds) != 0 {
			t.Fatalf("frame %d: %+v %d bytes %v %v", i, h, len(body), fds, err)
		}
	}
	if large != ReadBufSize+100 {
		t.Fatalf("the large body came from Large(%d)", large)
	}
	if r.Buffered() {
		t.Fatal("a frame left buffered")
	}
}

func TestFrameReaderDescriptorStaysWithItsFrame(t *testing.T) {
	r, w := readerPair(t, ReaderOptions{})
	f, err := os.CreateTemp(t.TempDir(), "fd")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	first := Frame(Header{Version: Version, Op: OpDel, ID: 1}, nil)
	withFD := Frame(Header{Version: Version, Op: OpPutFD, ID: 2}, []byte("x"))
	if _, err := w.Write(first); err != nil {
		t.Fatal(err)
	}
	if _, _, err := w.WriteMsgUnix(withFD, unix.UnixRights(int(f.Fd())), nil); err != nil {
		t.Fatal(err)
	}
	if h, _, fds, err := r.Read(); err != nil || h.ID != 1 || len(fds) != 0 {
		t.Fatalf("first frame: %+v %v %v", h, fds, err)
	}
	h, _, fds, err := r.Read()
	if err != nil || h.ID != 2 || len(fds) != 1 {
		t.Fatalf("second frame: %+v %v %v", h, fds, err)
	}
	CloseAll(fds)
}

func TestFrameReaderRefusals(t *testing.T) {
	r, w := readerPair(t, ReaderOptions{MaxFrame: 64})
	go write(w, Frame(Header{Version: Version, Op: OpPut, ID: 5}, make([]byte, 100)))
	if h, _, _, err := r.Read(); !errors.Is(err, ErrFrameTooLarge) || h.ID != 5 {
		t.Fatalf("too large: %+v %v", h, err)
	}
	r, w = readerPair(t, ReaderOptions{})
	go write(w, []byte{3, 0, 0, 0})
	if _, _, _, err := r.Read(); !errors.Is(err, ErrShortFrame) {
		t.Fatalf("short: %v", err)
	}
	r, w = readerPair(t, ReaderOptions{})
	go func(w *net.UnixConn) {
		w.Write(Frame(Header{Version: Version, Op: OpPut}, make([]byte, 10))[:20])
		w.Close()
	}(w)
	if _, _, _, err := r.Read(); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("cut short: %v", err)
	}
	refused := errors.New("over budget")
	r, w = readerPair(t, ReaderOptions{Large: func(int, time.Time) ([]byte, error) { return nil, refused }})
	go write(w, Frame(Header{Version: Version, Op: OpPut}, make([]byte, ReadBufSize)))
	if _, _, _, err := r.Read(); err != refused {
		t.Fatalf("budget: %v", err)
	}
}

// write sends b: w is passed, not captured, as the test reuses its name.
func write(w *net.UnixConn, b []byte) { w.Write(b) }

// FuzzFrameReader: whatever a client sends, Read returns frames or an
// error, never a panic or a body past its frame.
func FuzzFrameReader(f *testing.F) {
	f.Add(Frame(Header{Version: 1, Op: OpPut, ID: 3}, AppendPut(nil, &PutRequest{Pool: "p", PageSize: 4, Keys: []uint64{1}, Pages: []byte("abcd")})))
	f.Add([]byte{0, 0, 0, 0})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 1, 2})
	f.Add(append(Frame(Header{Version: 1, Op: OpDel}, nil), Frame(Header{Version: 1, Op: OpGet, ID: 9}, []byte{1, 2})...))
	f.Fuzz(func(t *testing.T, data []byte) {
		r, w := readerPair(t, ReaderOptions{MaxFrame: 1 << 17})
		go func() { w.Write(data); w.CloseWrite() }()
		for {
			_, body, fds, err := r.Read()
			if err != nil {
				return
			}
			if len(body) > 1<<17 || len(fds) != 0 {
				t.Fatalf("body of %d bytes, %d descriptors", len(body), len(fds))
			}
		}
	})
}

// A client that passes descriptors with every byte of a frame it never
// finishes gets ErrTooManyFDs, and the reader holds none of them.
func TestFrameReaderDescriptorFlood(t *testing.T) {
	r, w := readerPair(t, ReaderOptions{})
	f, err := os.CreateTemp(t.TempDir(), "fd")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	before := openFDs(t)
	frame := Frame(Header{Version: Version, Op: OpPutFD, ID: 1}, make([]byte, 100))
	rights := unix.UnixRights(int(f.Fd()), int(f.Fd()), int(f.Fd()), int(f.Fd()))
	go func(w *net.UnixConn) {
		for i := range frame {
			if _, _, err := w.WriteMsgUnix(frame[i:i+1], rights, nil); err != nil {
				return
			}
		}
	}(w)
	if _, _, _, err := r.Read(); !errors.Is(err, ErrTooManyFDs) {
		t.Fatalf("flood: %v", err)
	}
	if n := openFDs(t); n > before {
		t.Fatalf("%d descriptors open after the flood, %d before", n, before)
	}
}

func openFDs(t *testing.T) int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip(err)
	}
	return len(ents)
}
