package ublk

import (
	"errors"
	"testing"
)

// A ring on this kernel (which has io_uring but no ublk) completes NOPs,
// more of them than it has SQEs, in several rounds.
func TestRingNop(t *testing.T) {
	r, err := newRing(8)
	if errors.Is(err, ErrNoUring) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer r.close()
	seen := map[uint64]bool{}
	next := uint64(0)
	for round := 0; round < 5; round++ {
		n := 0
		for sqe := r.next(); sqe != nil; sqe = r.next() {
			prepNop(sqe, next)
			next++
			n++
		}
		if n != 8 {
			t.Fatalf("round %d: %d SQEs free, want 8", round, n)
		}
		got := 0
		for got < n {
			if err := r.submit(1); err != nil {
				t.Fatal(err)
			}
			got += r.reap(func(c cqe) {
				if c.Res != 0 {
					t.Errorf("NOP %d: res %d", c.UserData, c.Res)
				}
				if seen[c.UserData] {
					t.Errorf("NOP %d completed twice", c.UserData)
				}
				seen[c.UserData] = true
			})
		}
	}
	if len(seen) != 40 {
		t.Fatalf("%d NOPs completed, want 40", len(seen))
	}
}

// Without the driver, opening the control device says why and what to do.
func TestUnavailableSaysWhy(t *testing.T) {
	err := Available()
	if err == nil {
		t.Skip("this kernel has ublk")
	}
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("error %v is not ErrUnavailable", err)
	}
	t.Log(err)
}
