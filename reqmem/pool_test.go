package reqmem

import "testing"

// A sweep drops what went unused since the one before, and says how much.
func TestSparesSweepSays(t *testing.T) {
	var s spares[[]byte]
	s.max = 4
	s.put(make([]byte, 0, 100))
	s.put(make([]byte, 0, 50))
	size := func(b []byte) int { return cap(b) }
	if n := s.sweep(size); n != 0 {
		t.Fatalf("first sweep dropped %d bytes", n)
	}
	if b, ok := s.get(); !ok || cap(b) != 50 {
		t.Fatalf("get after a sweep: %v %d", ok, cap(b))
	}
	if n := s.sweep(size); n != 100 {
		t.Fatalf("second sweep dropped %d bytes, want 100", n)
	}
	if _, ok := s.get(); ok {
		t.Fatal("a dropped spare came back")
	}
}
