package ublk

import (
	"errors"
	"runtime"
	"testing"

	"golang.org/x/sys/unix"
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

// A queue ring takes SINGLE_ISSUER|DEFER_TASKRUN where the kernel has them
// (6.1 on): it completes NOPs for the thread that set it up, and another
// thread's submit is refused, which shows the flags took effect.
func TestQueueRingFlags(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	r, flags, err := newQueueRing(8)
	if errors.Is(err, ErrNoUring) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer r.close()
	if flags == 0 {
		t.Skip("this kernel refused the queue ring's flags; a plain ring serves")
	}
	prepNop(r.next(), 7)
	if err := r.submit(1); err != nil {
		t.Fatal(err)
	}
	if n := r.reap(func(c cqe) {
		if c.UserData != 7 || c.Res != 0 {
			t.Errorf("NOP: user data %d res %d", c.UserData, c.Res)
		}
	}); n != 1 {
		t.Fatalf("%d completions, want 1", n)
	}
	other := make(chan error)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		prepNop(r.next(), 8)
		other <- r.submit(0)
	}()
	if err := <-other; !errors.Is(err, unix.EEXIST) {
		t.Fatalf("submit from another thread: %v, want EEXIST (SINGLE_ISSUER)", err)
	}
}
