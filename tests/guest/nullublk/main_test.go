package main

import (
	"bytes"
	"errors"
	"sync"
	"testing"

	"golang.org/x/sys/unix"
)

const block = 4096

// page is a page like the workload's (512 bytes, then one 64-byte period
// repeated) or, with periodic false, one that repeats nothing.
func page(seed byte, periodic bool) []byte {
	p := make([]byte, block)
	for i := range p {
		p[i] = byte(i*7) ^ seed
		if periodic && i >= 512 {
			p[i] = byte((i-512)%64) ^ seed
		}
	}
	return p
}

func newStore(t *testing.T, blocks uint64, fullMiB int) *nullStore {
	s, err := newNullStore(blocks, fullMiB)
	if err != nil {
		t.Skip("store memory not locked here:", err) // MAP_LOCKED past RLIMIT_MEMLOCK
	}
	return s
}

func TestStoreRoundTrip(t *testing.T) {
	s := newStore(t, 16, 4)
	a, b, c := page(1, true), page(2, false), page(3, true)
	for i, p := range [][]byte{a, b, c} {
		if err := s.put(uint64(3+i), p); err != nil {
			t.Fatal(err)
		}
	}
	// Overwriting frees the old slot and keeps the new version.
	c2 := page(9, false)
	if err := s.put(5, c2); err != nil {
		t.Fatal(err)
	}
	s.discard(4, 1)
	got := make([]byte, block)
	for _, w := range []struct {
		k    uint64
		want []byte
	}{{3, a}, {4, make([]byte, block)}, {5, c2}} {
		s.get(w.k, got)
		if !bytes.Equal(got, w.want) {
			t.Fatalf("block %d came back wrong", w.k)
		}
	}
	if s.free() != 4<<20/block-1 {
		t.Fatalf("%d whole slots free, want all but block 5's", s.free())
	}
	if err := s.put(16, a); !errors.Is(err, unix.EINVAL) {
		t.Fatalf("a block beyond the device: %v", err)
	}
}

func TestStoreFull(t *testing.T) {
	s := newStore(t, 2048, 4) // room for 1024 whole pages
	var err error
	for k := uint64(0); k < 2048 && err == nil; k++ {
		err = s.put(k, page(byte(k), false))
	}
	if !errors.Is(err, unix.ENOSPC) {
		t.Fatalf("got %v, want ENOSPC once the whole pages' room is used", err)
	}
	if err := s.put(2047, page(1, true)); err != nil {
		t.Fatal("a repeating page found no slot:", err)
	}
}

// Queues call the store from their own threads at once (go test -race
// sees the Go side only; the C side takes its mutex).
func TestStoreConcurrent(t *testing.T) {
	s := newStore(t, 1024, 4)
	var wg sync.WaitGroup
	for q := 0; q < 4; q++ {
		wg.Go(func() {
			got := make([]byte, block)
			for i := 0; i < 2000; i++ {
				k := uint64(q*256 + i%256)
				want := page(byte(k+uint64(i)), i%3 == 0)
				if err := s.put(k, want); err != nil {
					t.Error(err)
					return
				}
				if s.get(k, got); !bytes.Equal(got, want) {
					t.Errorf("block %d came back wrong", k)
					return
				}
			}
		})
	}
	wg.Wait()
}
