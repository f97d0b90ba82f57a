package pagecache

import (
	"testing"

	"github.com/s4d-project/s4d/pagefmt"
)

func TestPoolCodec(t *testing.T) {
	s := New(4096, 0)
	s.SetLimits(Limits{PoolsPerUser: 1})
	if c, err := s.PoolCodec(1, "z"); c != 0 || err != nil {
		t.Fatalf("a pool not made yet: %v %v", c, err)
	}
	if err := s.SetPoolCodec(1, "z", pagefmt.CodecZstd); err != nil {
		t.Fatal(err)
	}
	if c, err := s.PoolCodec(1, "z"); c != pagefmt.CodecZstd || err != nil {
		t.Fatalf("after setting zstd: %v %v", c, err)
	}
	if in, _ := s.PoolInfo(1, "z"); in.Codec != pagefmt.CodecZstd || in.Pages != 0 {
		t.Fatalf("pool info %+v", in)
	}
	if _, err := s.PoolCodec(2, "z"); err != ErrPermission {
		t.Fatalf("another user: %v", err)
	}
	if err := s.SetPoolCodec(2, "z", 0); err != ErrPermission {
		t.Fatalf("another user setting: %v", err)
	}
	if err := s.SetPoolCodec(1, "second", pagefmt.CodecLZ4); err != ErrPoolLimit {
		t.Fatalf("over the pool limit: %v", err)
	}
}
