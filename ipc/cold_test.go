package ipc

import (
	"testing"
	"time"
)

func TestColdMessages(t *testing.T) {
	i := &IdleRequest{Pool: "p", Flags: IdleMark, MinAge: 90 * time.Second, List: 5}
	got, err := DecodeIdleRequest(i.Encode())
	if err != nil || got != *i {
		t.Fatalf("idle: %+v %v", got, err)
	}
	r := &RecompressRequest{Pool: "", Flags: RecompressIdle | RecompressHuge, MinAge: time.Hour}
	gr, err := DecodeRecompressRequest(r.Encode())
	if err != nil || gr != *r {
		t.Fatalf("recompress: %+v %v", gr, err)
	}
	for name, body := range map[string][]byte{
		"idle cut short":        i.Encode()[:5],
		"idle trailing byte":    append(i.Encode(), 0),
		"recompress cut short":  r.Encode()[:3],
		"recompress no flags":   (&RecompressRequest{}).Encode(),
		"recompress other bits": (&RecompressRequest{Flags: 4}).Encode(),
	} {
		var err error
		if name[0] == 'i' {
			_, err = DecodeIdleRequest(body)
		} else {
			_, err = DecodeRecompressRequest(body)
		}
		if err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if _, err := DecodeIdleRequest((&IdleRequest{Flags: 2}).Encode()); err == nil {
		t.Error("unknown IDLE flag accepted")
	}
}

func TestPoolCodecMessage(t *testing.T) {
	p, c, err := DecodePoolCodec(EncodePoolCodec("pool", "zstd"))
	if err != nil || p != "pool" || c != "zstd" {
		t.Fatalf("%q %q %v", p, c, err)
	}
	if _, _, err := DecodePoolCodec(EncodePoolCodec("pool", "lzma")); err == nil {
		t.Fatal("unknown codec accepted")
	}
	if _, _, err := DecodePoolCodec(EncodePoolCodec("pool", "")[:3]); err == nil {
		t.Fatal("short body accepted")
	}
}
