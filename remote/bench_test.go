package remote

import (
	"context"
	"fmt"
	"testing"
)

// Put and Get throughput of sealed blocks against the loopback cluster:
// batches of 64 blocks, WAIT for one replica on every Put. The same 64 IDs
// are overwritten, so the cluster's memory stays small.
func BenchmarkStore(b *testing.B) {
	tc := getCluster(b)
	s := newTestStore(b, tc, testKey, nil)
	const batch = 64
	for _, size := range []int{4 << 10, 64 << 10, 1 << 20} {
		ns := Namespace{"bench", fmt.Sprint(size)}
		bs := randBlocks(batch, 1, 1)
		for i := range bs {
			bs[i].Data = make([]byte, size)
			copy(bs[i].Data, fmt.Sprint(i)) // unique, no compression anyway
		}
		b.Run(fmt.Sprintf("Put/%dK", size>>10), func(b *testing.B) {
			b.SetBytes(int64(batch * size))
			for b.Loop() {
				for _, err := range s.Put(context.Background(), ns, bs) {
					if err != nil {
						b.Fatal(err)
					}
				}
			}
		})
		mustPut(b, s, ns, bs)
		b.Run(fmt.Sprintf("Get/%dK", size>>10), func(b *testing.B) {
			b.SetBytes(int64(batch * size))
			for b.Loop() {
				_, errs := s.Get(context.Background(), ns, refs(bs))
				for _, err := range errs {
					if err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}
