package daemon

import (
	"testing"

	"golang.org/x/sys/unix"
)

// The valve holds its memory, hands all of it to the kernel at once, and
// takes it back.
func TestValveReleasesAndRefills(t *testing.T) {
	const size = 4 << 20
	v, err := newValve(size)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { unix.Munmap(v.mem); unix.Close(v.fd) }()
	held := func() int64 {
		var st unix.Stat_t
		if err := unix.Fstat(v.fd, &st); err != nil {
			t.Fatal(err)
		}
		return st.Blocks * 512
	}
	if got := held(); got != size {
		t.Fatalf("holds %d bytes, want %d", got, size)
	}
	v.release()
	if got := held(); got != 0 || !v.open.Load() || v.opens.Load() != 1 {
		t.Fatalf("after release: holds %d bytes, open %v, opens %d", got, v.open.Load(), v.opens.Load())
	}
	v.refill()
	if got := held(); got != size || v.open.Load() {
		t.Fatalf("after refill: holds %d bytes, open %v", got, v.open.Load())
	}
}
