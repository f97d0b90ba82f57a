// Command nullublk is a measuring tool for tests/guest/speed.sh, not a user
// feature: a ublk server on the same ublk package as the daemon (queue
// threads, io_uring, the gathering), with the cheapest store that gives
// every page back right (memStore: no index, codec or checksum). Swap on
// it costs the kernel's side, ublk and io_uring's round trip and the queue
// thread's wake-ups, and next to nothing else: the floor of a swap-in
// through a ublk server in the same guest. (A store answering zeros does
// not do: every process's swapped pages, the workload's own heap
// included, come back through it.)
//
//	nullublk [--size 1G] [--depth 32] [--queues 0] [--full-mib 16] [--tag null]
//
// It prints the block device's path, serves until SIGTERM or SIGINT, then
// prints its own timers as an S4D-RESULT line (kind=ublk-server) and
// removes the device.
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/s4d-project/s4d/ublk"
	"golang.org/x/sys/unix"
)

// memStore holds every page in memory, at almost no cost per page: a page
// whose bytes from head on repeat with a period of period bytes (the
// workload's pages do: 512 random bytes, then one 64-byte block over and
// over) is kept as its head and one period; any other (other processes'
// pages, the swap header) whole. It is no general store: it is the
// cheapest one that gives every page back right on this workload, so a
// swap-in costs the round trip and next to nothing else. Its memory is
// all taken and made present at start, a repeating page's slot for every
// block of the device (the kernel discards freed swap slots only a
// cluster at a time, so blocks stay held long after their pages are
// back): growing later meant a first touch under memory pressure on the
// I/O path, and the guest stalled (the very wait the daemon's locking
// avoids).
type memStore struct {
	mu           sync.Mutex // a queue per CPU: Put and Get come from several threads
	small, full  [][]byte   // chunks of slots: smallSize bytes, block bytes
	freeS, freeF []uint32   // free slot numbers, used as stacks
	where        []uint32   // per block: 0 none, 1+n small slot n, fullBit|n full slot n
	firstErr     error
}

const (
	block     = 4096
	head      = 512
	period    = 64
	smallSize = head + period
	fullBit   = 1 << 31
	chunk     = 4 << 20
	perSmall  = chunk / smallSize // slots in a chunk
	perFull   = chunk / block
)

// errFull refuses a page that repeats nothing once --full-mib is used.
var errFull = errors.New("nullublk: no room left for pages kept whole (raise --full-mib)")

// newMemStore sets aside a repeating page's slot for each of blocks and
// fullMiB for pages kept whole.
func newMemStore(blocks uint64, fullMiB int) *memStore {
	s := &memStore{where: make([]uint32, blocks)}
	for len(s.small)*perSmall < int(blocks) {
		s.grow(&s.small, &s.freeS, perSmall)
	}
	for len(s.full)*chunk < fullMiB<<20 {
		s.grow(&s.full, &s.freeF, perFull)
	}
	return s
}

// grow adds a chunk of slots to *chunks and their numbers to *free.
func (s *memStore) grow(chunks *[][]byte, free *[]uint32, per int) {
	c := make([]byte, chunk)
	ublk.Touch(c)
	base := len(*chunks) * per
	*chunks = append(*chunks, c)
	for i := per - 1; i >= 0; i-- {
		*free = append(*free, uint32(base+i))
	}
}

func (s *memStore) slotS(n uint32) []byte {
	c, i := int(n)/perSmall, int(n)%perSmall
	return s.small[c][i*smallSize : (i+1)*smallSize]
}

func (s *memStore) slotF(n uint32) []byte {
	c, i := int(n)/perFull, int(n)%perFull
	return s.full[c][i*block : (i+1)*block]
}

func (s *memStore) drop(k uint64) {
	switch w := s.where[k]; {
	case w == 0:
	case w&fullBit != 0:
		s.freeF = append(s.freeF, w&^fullBit)
	default:
		s.freeS = append(s.freeS, w-1)
	}
	s.where[k] = 0
}

func (s *memStore) Put(keys []uint64, pages []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	err := s.put(keys, pages)
	if err != nil && s.firstErr == nil {
		// Said once, where it happened (speed.sh shows nullublk's output).
		s.firstErr = err
		fmt.Fprintf(os.Stderr, "nullublk: write of %d blocks from %d: %v (free: %d repeating, %d whole)\n",
			len(keys), keys[0], err, len(s.freeS), len(s.freeF))
	}
	return err
}

func (s *memStore) put(keys []uint64, pages []byte) error {
	for i, k := range keys {
		if k >= uint64(len(s.where)) {
			return fmt.Errorf("nullublk: block %d beyond the device", k)
		}
		p := pages[i*block : (i+1)*block]
		s.drop(k)
		if bytes.Equal(p[head+period:], p[head:block-period]) {
			// Never empty: a slot for every block, and each block holds one.
			n := s.freeS[len(s.freeS)-1]
			s.freeS = s.freeS[:len(s.freeS)-1]
			copy(s.slotS(n), p[:smallSize])
			s.where[k] = n + 1
			continue
		}
		if len(s.freeF) == 0 {
			return errFull
		}
		n := s.freeF[len(s.freeF)-1]
		s.freeF = s.freeF[:len(s.freeF)-1]
		copy(s.slotF(n), p)
		s.where[k] = n | fullBit
	}
	return nil
}

func (s *memStore) Get(keys []uint64, dst []byte, missing, failed []bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, k := range keys {
		d := dst[i*block : (i+1)*block]
		switch w := s.where[min(k, uint64(len(s.where)-1))]; {
		case k >= uint64(len(s.where)) || w == 0:
			missing[i] = true // never written: the gatherer zeroes it
		case w&fullBit != 0:
			copy(d, s.slotF(w&^fullBit))
		default:
			copy(d, s.slotS(w-1))
			for off := smallSize; off < block; off += copy(d[off:], d[head:smallSize]) {
			}
		}
	}
	return nil
}

func (s *memStore) Delete(keys []uint64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, k := range keys {
		if k < uint64(len(s.where)) {
			s.drop(k)
		}
	}
	return nil
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
	depth := flag.Int("depth", 32, "requests in flight per queue")
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
	// Nothing on the I/O path allocates; a collection would only add
	// pauses to what is measured.
	debug.SetGCPercent(-1)
	if err := unix.Mlockall(unix.MCL_CURRENT | unix.MCL_FUTURE | unix.MCL_ONFAULT); err != nil {
		fmt.Fprintf(os.Stderr, "nullublk: mlockall: %v\n", err)
		os.Exit(1)
	}
	if err := lockCode(); err != nil {
		fmt.Fprintf(os.Stderr, "nullublk: %v\n", err)
		os.Exit(1)
	}
	st := newMemStore(size/block, *fullMiB)
	dev, err := ublk.Create(ublk.Options{Size: size, Queues: *queues, Depth: *depth}, st)
	if err != nil {
		fmt.Fprintf(os.Stderr, "nullublk: %v\n", err)
		os.Exit(1)
	}
	fmt.Println(dev.BlockPath())
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	<-sig
	s := &dev.Stats
	per := func(ns, n uint64) float64 { return float64(ns) / 1e3 / float64(max(n, 1)) }
	fmt.Printf("S4D-RESULT tag=%s kind=ublk-server queues=%d waits=%d requests=%d read_calls=%d read_pages=%d write_calls=%d write_pages=%d serve_us_per_wait=%.1f read_store_us=%.1f read_copy_us=%.1f\n",
		*tag, dev.Queues(), s.Waits.Load(), s.Requests.Load(), s.Reads.Calls.Load(), s.Reads.Pages.Load(),
		s.Writes.Calls.Load(), s.Writes.Pages.Load(), per(s.ServeNs.Load(), s.Waits.Load()),
		per(s.Reads.StoreNs.Load(), s.Reads.Calls.Load()), per(s.Reads.CopyNs.Load(), s.Reads.Calls.Load()))
	if err := dev.Close(); err != nil {
		fmt.Fprintf(os.Stderr, "nullublk: %v\n", err)
		os.Exit(1)
	}
}
