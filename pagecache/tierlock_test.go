package pagecache

import (
	"bytes"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/s4d-project/s4d/backends"
	"github.com/s4d-project/s4d/backends/corpus"
	"github.com/s4d-project/s4d/backends/cpu"
	"github.com/s4d-project/s4d/pagefmt"
)

// slowTier is a memTier whose reads take the bytes at their places, then
// wait until released, as a read from a cluster failing over would.
type slowTier struct {
	memTier
	started chan struct{} // a read is waiting
	release chan struct{} // closed: reads go on
	reads   atomic.Int32
}

func (m *slowTier) Read(rs []TierRead) {
	m.reads.Add(1)
	m.memTier.Read(rs) // the bytes are those of the places now (a Hold's promise)
	m.started <- struct{}{}
	<-m.release
}

// A read of pages off RAM (Get, Inspect) keeps no writer of the store
// waiting while the Tier reads: a PUT of the very page being read
// completes meanwhile, and the reader answers the page the PUT wrote, not
// the bytes read for the old one; if the new page went off RAM too
// meanwhile, it is read from its new place.
func TestTierReadOutsideLock(t *testing.T) {
	const ps = 4096
	pages := corpus.Pages(corpus.Text, 5, ps, 34)
	readers := map[string]func(s *Store, key uint64) ([]byte, Result, error){
		"Get": func(s *Store, key uint64) ([]byte, Result, error) {
			res := make([]Result, 1)
			st, _, err := s.Get(1, "p", []uint64{key}, nil, nil, res)
			if err != nil || res[0] != OK {
				return nil, res[0], err
			}
			return decode(s, st[0]), OK, nil
		},
		"View": func(s *Store, key uint64) ([]byte, Result, error) {
			res := make([]Result, 1)
			var page []byte
			_, err := s.View(1, "p", []uint64{key}, nil, res, func(st []pagefmt.Stored) error {
				if res[0] == OK {
					page = decode(s, st[0])
				}
				return nil
			})
			return page, res[0], err
		},
		"Inspect": func(s *Store, key uint64) ([]byte, Result, error) {
			info, err := s.Inspect(1, "p", []uint64{key}, true)
			if err != nil || info[0].Result != OK {
				return nil, info[0].Result, err
			}
			return decode(s, pagefmt.Stored{Class: info[0].Class, Data: info[0].Data, Fill: info[0].Fill}), OK, nil
		},
	}
	for name, read := range readers {
		for _, again := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/offAgain=%v", name, again), func(t *testing.T) {
				s := New(ps, 0)
				m := &slowTier{memTier: memTier{s: s, objs: map[Loc][]byte{}},
					started: make(chan struct{}, 1), release: make(chan struct{})}
				s.SetTier(m)
				putOK(t, s, 1, "p", keysFrom(0, 4), pages[:4*ps])
				m.MakeRoom(1 << 30) // every page goes below RAM
				if off := len(s.Pick(func(r PageRef) bool { return r.OnFile() }, 1<<62)); off != 4 {
					t.Fatalf("%d pages off RAM, want 4", off)
				}
				type answer struct {
					page []byte
					res  Result
					err  error
				}
				got := make(chan answer, 1)
				go func() {
					page, res, err := read(s, 2)
					got <- answer{page, res, err}
				}()
				select {
				case <-m.started:
				case <-time.After(5 * time.Second):
					close(m.release)
					t.Fatal("the Tier was never asked for the page off RAM")
				}
				put := make(chan error, 1)
				b, c := fill(t, pages[4*ps:], ps)
				go func() {
					put <- s.Put(1, "p", keysFrom(2, 1), b, c, s.BackendID("cpu"), make([]Result, 1))
				}()
				select {
				case err := <-put:
					if err != nil {
						t.Errorf("PUT during the read: %v", err)
					}
				case <-time.After(5 * time.Second):
					close(m.release)
					<-put
					t.Fatalf("a PUT waited 5 s for a Tier read: %s holds the store's lock across it", name)
				}
				if again {
					m.MakeRoom(1 << 30) // the new page goes below RAM too, elsewhere
				}
				close(m.release)
				var a answer
				select {
				case a = <-got:
				case <-time.After(5 * time.Second):
					t.Fatalf("%s did not return once the Tier read was released", name)
				}
				if a.err != nil || a.res != OK {
					t.Fatalf("%s: %v %v", name, a.res, a.err)
				}
				if bytes.Equal(a.page, pages[2*ps:3*ps]) {
					t.Fatalf("%s answered the page read before the PUT replaced it", name)
				}
				if !bytes.Equal(a.page, pages[4*ps:]) {
					t.Fatalf("%s answered bytes that are neither page", name)
				}
				if want := map[bool]int32{false: 1, true: 2}[again]; m.reads.Load() != want {
					t.Fatalf("%d Tier reads, want %d", m.reads.Load(), want)
				}
			})
		}
	}
}

// decode decompresses one stored page.
func decode(s *Store, st pagefmt.Stored) []byte {
	cb, _ := cpu.New(backends.Options{})
	out := make([]byte, s.PageSize())
	if !cb.DecodePage(st, out) {
		return nil
	}
	return out
}
