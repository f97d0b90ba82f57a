package daemon

import (
	"bytes"
	"encoding/binary"
	"testing"
)

// The daemon's store as swap keeps pages in it (swapdev.Store): pages come
// back as put, through the router; a key never put, and every key of a
// pool never made, is missing and reads as zeros; Drop forgets the keys
// below n and nothing else. swapdev's own tests run export and import
// against a store in memory.
func TestSwapStore(t *testing.T) {
	d, _ := serveDaemon(t, nil)
	st := swapStore{d}
	page := func(k uint64) []byte {
		p := bytes.Repeat([]byte("swap page kept "), 4096/15+1)[:4096]
		binary.LittleEndian.PutUint64(p[100:], k*0x9e3779b97f4a7c15)
		return p
	}
	keys := []uint64{0, 1, 5, 9}
	var pages []byte
	for _, k := range keys {
		pages = append(pages, page(k)...)
	}
	w := st.Pages("(swap 3)")
	if err := w.Put(keys, pages); err != nil {
		t.Fatal(err)
	}
	get := func(pool string, keys ...uint64) ([]byte, []bool) {
		t.Helper()
		dst := bytes.Repeat([]byte{0xee}, len(keys)*4096)
		missing, failed := make([]bool, len(keys)), make([]bool, len(keys))
		if err := st.Pages(pool).Get(keys, dst, missing, failed); err != nil {
			t.Fatal(err)
		}
		for i, f := range failed {
			if f {
				t.Fatalf("key %d failed", keys[i])
			}
		}
		return dst, missing
	}
	dst, missing := get("(swap 3)", 0, 2, 9)
	if !bytes.Equal(dst[:4096], page(0)) || !bytes.Equal(dst[2*4096:], page(9)) || missing[0] || missing[2] {
		t.Fatalf("pages put did not come back: missing %v", missing)
	}
	if !missing[1] || !bytes.Equal(dst[4096:2*4096], make([]byte, 4096)) {
		t.Fatalf("a key never put: missing %v, want missing and zeros", missing[1])
	}
	if _, missing := get("(swap 4)", 0, 1); !missing[0] || !missing[1] {
		t.Fatalf("a pool never made: missing %v, want every key", missing)
	}
	st.Drop("(swap 3)", 6)
	if _, missing := get("(swap 3)", 0, 1, 5, 9); !missing[0] || !missing[1] || !missing[2] || missing[3] {
		t.Fatalf("after Drop below 6: missing %v, want keys 0, 1, 5 gone and 9 kept", missing)
	}
	st.Drop("(swap 4)", 6) // no pool: nothing to do
}
