package daemon

import (
	"bytes"
	"context"
	"testing"

	"github.com/s4d-project/s4d/backends/corpus"
	"github.com/s4d-project/s4d/client"
	"github.com/s4d-project/s4d/ipc"
)

// GET and GET_FD over batches larger than one hold of the store lock, with
// keys missing here and there: every page lands where it belongs, and the
// memfd keeps what it had where a key is missing.
func TestFetchAcrossChunks(t *testing.T) {
	c := serveInProcess(t, "cpu")

	const ps, n = 4096, 3*fetchChunk + 77
	pages := corpus.Pages(corpus.Mixed, n, ps, 3)
	keys := make([]uint64, n)
	var stored []uint64
	for i := range keys {
		keys[i] = uint64(i)
		if i%500 != 7 { // some keys never stored
			stored = append(stored, uint64(i))
		}
	}
	var put []byte
	for _, k := range stored {
		put = append(put, pages[k*ps:(k+1)*ps]...)
	}
	if codes, err := c.Put(context.Background(), "f", stored, put); err != nil || ipc.PageError(stored, codes) != nil {
		t.Fatalf("put: %v", err)
	}
	got, codes, err := c.Get(context.Background(), "f", keys)
	if err != nil {
		t.Fatal(err)
	}
	buf, err := client.NewPageBuffer(n * ps)
	if err != nil {
		t.Fatal(err)
	}
	defer buf.Close()
	for i := range buf.Bytes() {
		buf.Bytes()[i] = 0xEE
	}
	fdCodes, err := c.GetBuffer(context.Background(), "f", keys, buf, 0, ps)
	if err != nil {
		t.Fatal(err)
	}
	untouched := bytes.Repeat([]byte{0xEE}, ps)
	for i := range keys {
		want, fdWant := pages[i*ps:(i+1)*ps], pages[i*ps:(i+1)*ps]
		code := ipc.OK
		if i%500 == 7 {
			want, fdWant, code = make([]byte, ps), untouched, ipc.CodeNotFound
		}
		if codes[i] != code || fdCodes[i] != code {
			t.Fatalf("key %d: codes %v and %v, want %v", i, codes[i], fdCodes[i], code)
		}
		if !bytes.Equal(got[i*ps:(i+1)*ps], want) {
			t.Fatalf("GET: page %d came back wrong", i)
		}
		if !bytes.Equal(buf.Bytes()[i*ps:(i+1)*ps], fdWant) {
			t.Fatalf("GET_FD: page %d came back wrong", i)
		}
	}
}
