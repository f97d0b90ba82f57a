package main

import (
	"bytes"
	"errors"
	"testing"
)

// page is a page like the workload's (head random-ish bytes, then one
// period repeated) or, with periodic false, one that repeats nothing.
func page(seed byte, periodic bool) []byte {
	p := make([]byte, block)
	for i := range p {
		p[i] = byte(i*7) ^ seed
		if periodic && i >= head {
			p[i] = byte((i-head)%period) ^ seed
		}
	}
	return p
}

func TestMemStoreRoundTrip(t *testing.T) {
	s := newMemStore(16, 4)
	a, b, c := page(1, true), page(2, false), page(3, true)
	if err := s.Put([]uint64{3, 4, 5}, bytes.Join([][]byte{a, b, c}, nil)); err != nil {
		t.Fatal(err)
	}
	// Overwriting frees the old slot and keeps the new version.
	c2 := page(9, false)
	if err := s.Put([]uint64{5}, c2); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete([]uint64{4}); err != nil {
		t.Fatal(err)
	}
	dst := make([]byte, 4*block)
	for i := range dst {
		dst[i] = 0xee
	}
	missing, failed := make([]bool, 4), make([]bool, 4)
	if err := s.Get([]uint64{3, 4, 5, 99}, dst, missing, failed); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(dst[:block], a) || !bytes.Equal(dst[2*block:3*block], c2) {
		t.Fatal("a page came back wrong")
	}
	if missing[0] || !missing[1] || missing[2] || !missing[3] {
		t.Fatalf("missing %v, want the deleted block and the one beyond the device", missing)
	}
	if len(s.freeS) != perSmall-1 || len(s.freeF) != perFull-1 {
		t.Fatalf("slots leaked: %d small, %d full free", len(s.freeS), len(s.freeF))
	}
}

func TestMemStoreFull(t *testing.T) {
	s := newMemStore(4096, 4) // a chunk of whole pages: perFull of them
	var err error
	for k := uint64(0); k < 4096 && err == nil; k++ {
		err = s.Put([]uint64{k}, page(byte(k), false))
	}
	if !errors.Is(err, errFull) {
		t.Fatalf("got %v, want errFull once the whole pages' room is used", err)
	}
	// A repeating page still finds its slot.
	if err := s.Put([]uint64{4095}, page(1, true)); err != nil {
		t.Fatal(err)
	}
	if err := s.Put([]uint64{5000}, page(0, true)); err == nil {
		t.Fatal("a block beyond the device was taken")
	}
}

// Queues call the store from their own threads at once (go test -race).
func TestMemStoreConcurrent(t *testing.T) {
	s := newMemStore(1024, 4)
	done := make(chan struct{})
	for q := 0; q < 2; q++ {
		go func() {
			defer func() { done <- struct{}{} }()
			dst := make([]byte, block)
			for i := 0; i < 500; i++ {
				k := uint64(q*512 + i%512)
				if err := s.Put([]uint64{k}, page(byte(k), true)); err != nil {
					t.Error(err)
					return
				}
				if err := s.Get([]uint64{k}, dst, make([]bool, 1), make([]bool, 1)); err != nil || !bytes.Equal(dst, page(byte(k), true)) {
					t.Errorf("block %d came back wrong (err %v)", k, err)
					return
				}
			}
		}()
	}
	<-done
	<-done
}
