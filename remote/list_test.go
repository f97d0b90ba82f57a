package remote

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
)

// List finds exactly a pool's blocks on every master; a scan of the host
// prefix finds every pool of the host, which a sweep needs for pools no
// index names any more.
func TestList(t *testing.T) {
	tc := getCluster(t)
	s := newTestStore(t, tc, testKey, nil)
	ns := Namespace{"host-list", "pool-a"}
	other := Namespace{"host-list", "pool-b"}
	ids := []uint64{3, 17, 255, 1 << 40, 1<<64 - 1}
	var bs []Block
	for _, id := range ids {
		bs = append(bs, Block{ID: id, Gen: 1, Data: []byte("block")})
	}
	mustPut(t, s, ns, bs)
	mustPut(t, s, other, bs[:2])
	got, err := s.List(testCtx(t), ns)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(got)
	if !slices.Equal(got, ids) {
		t.Fatalf("List = %v, want %v", got, ids)
	}
	n := 0
	err = s.c.Scan(testCtx(t), s.HostPrefix("host-list")+"*", func(k []byte) error {
		if !strings.HasPrefix(string(k), s.HostPrefix("host-list")) {
			t.Errorf("scan returned %s", k)
		}
		n++
		return nil
	})
	if err != nil || n != len(ids)+2 {
		t.Fatalf("host scan: %d keys, want %d (%v)", n, len(ids)+2, err)
	}
	s.Delete(testCtx(t), ns, ids)
	if got, err := s.List(testCtx(t), ns); err != nil || len(got) != 0 {
		t.Fatalf("after delete: %v %v", got, err)
	}
}

// Many goroutines share one Store: the connection pools and the slot map
// under concurrent use (run with -race), every block back byte for byte.
func TestConcurrentUse(t *testing.T) {
	tc := getCluster(t)
	s := newTestStore(t, tc, testKey, func(o *Options) { o.PoolSize = 2 })
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ns := Namespace{"host-conc", fmt.Sprint(g)}
			for round := range 10 {
				bs := randBlocks(20, 3000, uint64(round))
				for i, err := range s.Put(context.Background(), ns, bs) {
					if err != nil {
						errs <- fmt.Errorf("put %d: %w", i, err)
						return
					}
				}
				data, gerrs := s.Get(context.Background(), ns, refs(bs))
				for i := range bs {
					if gerrs[i] != nil || !bytes.Equal(data[i], bs[i].Data) {
						errs <- fmt.Errorf("goroutine %d round %d block %d: %v", g, round, i, gerrs[i])
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}
