package refc

import (
	"bytes"
	"testing"

	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

func TestDecodersAgainstGoEncoders(t *testing.T) {
	d := Open()
	page := bytes.Repeat([]byte("the same words again and again; "), 128)
	if d.HasLZ4() {
		var c lz4.Compressor
		buf := make([]byte, lz4.CompressBlockBound(len(page)))
		n, err := c.CompressBlock(page, buf)
		if err != nil || n == 0 {
			t.Fatal(n, err)
		}
		got := make([]byte, len(page))
		if err := d.LZ4(buf[:n], got); err != nil || !bytes.Equal(got, page) {
			t.Fatalf("lz4: %v", err)
		}
		if err := d.LZ4(buf[:n/2], got); err == nil {
			t.Fatal("a truncated block decoded")
		}
	} else {
		t.Logf("no liblz4: %v", d.Missing)
	}
	if d.HasZstd() {
		enc, _ := zstd.NewWriter(nil)
		frame := enc.EncodeAll(page, nil)
		got := make([]byte, len(page))
		if err := d.Zstd(frame, got); err != nil || !bytes.Equal(got, page) {
			t.Fatalf("zstd: %v", err)
		}
		if err := d.Zstd(frame[:len(frame)-3], got); err == nil {
			t.Fatal("a truncated frame decoded")
		}
	} else {
		t.Logf("no libzstd: %v", d.Missing)
	}
}
