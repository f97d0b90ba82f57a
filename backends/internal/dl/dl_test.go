package dl

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"
)

func TestOpenAndSym(t *testing.T) {
	l, err := Open("libdoesnotexist.so.9", "libc.so.6")
	if err != nil {
		t.Fatal(err)
	}
	if l.Path != "libc.so.6" {
		t.Fatalf("loaded %s", l.Path)
	}
	if _, err := l.Sym("strlen"); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Sym("no_such_symbol_s4d"); err == nil || !strings.Contains(err.Error(), "no_such_symbol_s4d") {
		t.Fatalf("missing symbol: %v", err)
	}
}

func TestOpenMissing(t *testing.T) {
	_, err := Open("libnope1.so", "/nonexistent/libnope2.so")
	if err == nil || !strings.Contains(err.Error(), "libnope1.so") || !strings.Contains(err.Error(), "libnope2.so") {
		t.Fatalf("want both reasons, got %v", err)
	}
}

// TestOpenReasonAcrossThreads makes the loader's failure take long (dlopen
// of a FIFO blocks until a writer comes) while another goroutine keeps the
// only P busy: the runtime hands the P away during the C call and the
// caller resumes on another OS thread. dlerror's buffer is per thread, so
// an error read in a second C call came back empty there.
func TestOpenReasonAcrossThreads(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	stop := make(chan struct{})
	spun := make(chan struct{})
	go func() {
		defer close(spun)
		for {
			select {
			case <-stop:
				return
			default:
				runtime.Gosched()
			}
		}
	}()
	defer func() { close(stop); <-spun }()

	dir := t.TempDir()
	for i := 0; i < 3; i++ {
		fifo := filepath.Join(dir, fmt.Sprintf("notalib%d.so", i))
		if err := syscall.Mkfifo(fifo, 0o600); err != nil {
			t.Skipf("mkfifo: %v", err)
		}
		go func() {
			// Long past sysmon's 10 ms before it takes a P from a C call.
			time.Sleep(60 * time.Millisecond)
			f, err := os.OpenFile(fifo, os.O_WRONLY, 0)
			if err != nil {
				return
			}
			f.Write(make([]byte, 128)) // not an ELF header
			f.Close()
		}()
		_, err := Open(fifo)
		if err == nil || !strings.Contains(err.Error(), fifo) {
			t.Fatalf("try %d: want the loader's reason naming %s, got %q", i, fifo, err)
		}
	}
}

func TestResolve(t *testing.T) {
	l, err := Open("libc.so.6")
	if err != nil {
		t.Fatal(err)
	}
	var strlen, memcpy unsafe.Pointer
	if err := l.Resolve([]Entry{{"strlen", &strlen}, {"memcpy", &memcpy}}); err != nil {
		t.Fatal(err)
	}
	if strlen == nil || memcpy == nil || strlen == memcpy {
		t.Fatalf("strlen %p memcpy %p", strlen, memcpy)
	}
	var none unsafe.Pointer
	if err := l.Resolve([]Entry{{"strlen", &strlen}, {"no_such_symbol_s4d", &none}}); err == nil || !strings.Contains(err.Error(), "no_such_symbol_s4d") {
		t.Fatalf("missing symbol: %v", err)
	}
}
