// Command nullublk is a measuring tool for tests/guest/speed.sh, not a user
// feature: a ublk server on the daemon's own swap I/O path (package
// swapio's C queue threads, io_uring, pinning, depth and request size)
// with the cheapest store that gives every page back right (store.c: no
// codec, no checksum, no slabs to refill). Swap on it costs the kernel's
// side, ublk and io_uring's round trip and the queue thread's wake-ups,
// and next to nothing else: the floor of a swap-in through a ublk server
// in the same guest. (A store answering zeros does not do: every
// process's swapped pages, the workload's own heap included, come back
// through it.)
//
// Its store holds a page whose bytes from 512 on repeat with a period of
// 64 (the workload's pages do) as its first 576 bytes, in a slot every
// block has; any other page (other processes', the swap header) whole, in
// --full-mib set aside. It is no general store: it is the cheapest one
// that is right on this workload.
//
//	nullublk [--size 1G] [--depth 64] [--queues 0] [--full-mib 16] [--tag null]
//
// It prints the block device's path, serves until SIGTERM or SIGINT, then
// prints its queues' counters as an S4D-RESULT line (kind=ublk-server) and
// removes the device.
package main

/*
#include "store.h"
*/
import "C"

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"unsafe"

	"github.com/s4d-project/s4d/swapio"
	"github.com/s4d-project/s4d/ublk"
	"golang.org/x/sys/unix"
)

// maxIO is the daemon's request size on the native path (swapdev/native.go).
const maxIO = 32 << 10

// nullStore is store.c's, in memory outside the Go heap.
type nullStore struct{ s *C.struct_null_store }

func newNullStore(blocks uint64, fullMiB int) (*nullStore, error) {
	mem, err := unix.Mmap(-1, 0, int(unsafe.Sizeof(C.struct_null_store{})), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_POPULATE)
	if err != nil {
		return nil, err
	}
	s := (*C.struct_null_store)(unsafe.Pointer(&mem[0]))
	if e := C.null_init(s, C.uint64_t(blocks), C.uint32_t(fullMiB<<20/4096)); e != 0 {
		return nil, fmt.Errorf("store of %d blocks: %w", blocks, unix.Errno(-e))
	}
	return &nullStore{s}, nil
}

// put, get and discard call the store as a queue thread does (tests).
func (n *nullStore) put(block uint64, page []byte) error {
	if e := C.null_write(unsafe.Pointer(n.s), C.uint64_t(block), unsafe.Pointer(&page[0]), nil); e != 0 {
		return unix.Errno(-e)
	}
	return nil
}

func (n *nullStore) get(block uint64, page []byte) {
	C.null_read(unsafe.Pointer(n.s), C.uint64_t(block), unsafe.Pointer(&page[0]))
}

func (n *nullStore) discard(block, count uint64) {
	C.null_discard(unsafe.Pointer(n.s), C.uint64_t(block), C.uint64_t(count))
}

func (n *nullStore) free() int { return int(n.s.nfree) }

func (n *nullStore) Ops() swapio.Ops {
	return swapio.Ops{Store: unsafe.Pointer(n.s), Read: unsafe.Pointer(C.null_read), Write: unsafe.Pointer(C.null_write), Discard: unsafe.Pointer(C.null_discard)}
}

// parseSize reads 1G, 512M, 4096 (bytes).
func parseSize(v string) (uint64, error) {
	mul := uint64(1)
	switch {
	case strings.HasSuffix(v, "G"):
		mul, v = 1<<30, strings.TrimSuffix(v, "G")
	case strings.HasSuffix(v, "M"):
		mul, v = 1<<20, strings.TrimSuffix(v, "M")
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil || n == 0 {
		return 0, fmt.Errorf("size %q: want a positive number with an optional M or G", v)
	}
	return n * mul, nil
}

// lockCode locks the program's own file mappings: its code lives on the
// guest's tmpfs, which swaps, and a first touch of a page of it under
// pressure would wait for a swap-in from this very device.
func lockCode() error {
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		return err
	}
	for _, line := range strings.Split(string(maps), "\n") {
		f := strings.Fields(line)
		if len(f) < 6 || !strings.HasPrefix(f[5], "/") {
			continue
		}
		var lo, hi uintptr
		if _, err := fmt.Sscanf(f[0], "%x-%x", &lo, &hi); err != nil || hi <= lo {
			continue
		}
		if _, _, e := unix.Syscall(unix.SYS_MLOCK, lo, hi-lo, 0); e != 0 {
			return fmt.Errorf("mlock %s: %w", f[5], e)
		}
	}
	return nil
}

func main() {
	sizeFlag := flag.String("size", "1G", "device size (bytes, or with M or G)")
	depth := flag.Int("depth", 64, "requests in flight per queue (the daemon's default)")
	queues := flag.Int("queues", 0, "hardware queues (0: one per CPU)")
	fullMiB := flag.Int("full-mib", 16, "MiB set aside for pages that repeat nothing (a repeating page's room is set aside for every block)")
	tag := flag.String("tag", "null", "tag of the result line")
	flag.Parse()
	size, err := parseSize(*sizeFlag)
	if err == nil && *fullMiB < 4 {
		err = fmt.Errorf("--full-mib %d: want at least 4", *fullMiB)
	}
	if err != nil || flag.NArg() != 0 {
		fmt.Fprintf(os.Stderr, "nullublk: %v (args %q)\n", err, flag.Args())
		os.Exit(2)
	}
	// The queue threads touch their code, the C library and store.c's
	// memory only; locking the program's files keeps their code in RAM
	// (on the guest's tmpfs it could swap, onto this very device).
	if err := lockCode(); err != nil {
		fmt.Fprintf(os.Stderr, "nullublk: %v\n", err)
		os.Exit(1)
	}
	st, err := newNullStore(size/4096, *fullMiB)
	if err != nil {
		fmt.Fprintf(os.Stderr, "nullublk: %v\n", err)
		os.Exit(1)
	}
	dev, err := ublk.Create(ublk.Options{Size: size, Queues: *queues, Depth: *depth, MaxIO: maxIO, Server: st})
	if err != nil {
		fmt.Fprintf(os.Stderr, "nullublk: %v\n", err)
		os.Exit(1)
	}
	fmt.Println(dev.BlockPath())
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	<-sig
	q := dev.NativeStats()
	fmt.Printf("S4D-RESULT tag=%s kind=ublk-server queues=%d pinned=%d waits=%d requests=%d read_calls=%d read_pages=%d write_calls=%d write_pages=%d refused=%d\n",
		*tag, dev.Queues(), dev.PinnedQueues(), q.Waits, q.Requests, q.Reads, q.ReadPages, q.Writes, q.WritePages, uint64(st.s.refused))
	if err := dev.Close(); err != nil {
		fmt.Fprintf(os.Stderr, "nullublk: %v\n", err)
		os.Exit(1)
	}
}
