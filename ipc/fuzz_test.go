package ipc

import (
	"bytes"
	"testing"
)

func FuzzReadFrame(f *testing.F) {
	f.Add(Frame(Header{Version: 1, Op: OpPut, ID: 3}, AppendPut(nil, &PutRequest{Pool: "p", PageSize: 4, Keys: []uint64{1}, Pages: []byte("abcd")})))
	f.Add([]byte{0, 0, 0, 0})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 1, 2})
	f.Fuzz(func(t *testing.T, data []byte) {
		h, body, err := ReadFrame(bytes.NewReader(data), 1<<16, nil)
		if err != nil {
			return
		}
		// Whatever parses must survive every body decoder.
		DecodePut(body)
		DecodeKeys(OpGet, body)
		DecodeKeys(OpInspect, body)
		DecodeHelloRequest(body)
		DecodeHello(body)
		DecodeString(body)
		DecodeCodes(body, int(h.ID%64))
		DecodeGet(body, int(h.ID%64))
		DecodeInspect(body, make([]uint64, h.ID%16), h.Flags&1 != 0)
	})
}

func FuzzDecodePut(f *testing.F) {
	f.Add(AppendPut(nil, &PutRequest{Pool: "pool", PageSize: 8, Keys: []uint64{1, 2}, Pages: make([]byte, 16)}))
	f.Fuzz(func(t *testing.T, body []byte) {
		p, err := DecodePut(body)
		if err != nil {
			return
		}
		if uint64(len(p.Pages)) != uint64(len(p.Keys))*uint64(p.PageSize) {
			t.Fatalf("%d page bytes for %d keys of %d", len(p.Pages), len(p.Keys), p.PageSize)
		}
		if !bytes.Equal(AppendPut(nil, p), body) {
			t.Fatal("re-encoding differs")
		}
	})
}

func FuzzDecodePutFD(f *testing.F) {
	f.Add(AppendPutFD(nil, &PutFDRequest{Pool: "p", PageSize: 4096, Keys: []uint64{1, 2}, Offset: 8192}))
	f.Fuzz(func(t *testing.T, body []byte) {
		p, err := DecodePutFD(body)
		if err != nil {
			return
		}
		if !bytes.Equal(AppendPutFD(nil, p), body) {
			t.Fatal("re-encoding differs")
		}
	})
}
