// Package refc decodes pages with the reference C libraries, liblz4 and
// libzstd, loaded at run time: the independent decoders the engines'
// tests hold every stored page against, in process (no helper program per
// page), where the machine has the libraries.
package refc

/*
#include <stddef.h>

// Trampolines to the entry points found with dlsym.
static int s4d_lz4_decompress_safe(void *f, const char *src, char *dst, int n, int cap) {
	return ((int (*)(const char *, char *, int, int))f)(src, dst, n, cap);
}
static size_t s4d_zstd_decompress(void *f, void *dst, size_t cap, const void *src, size_t n) {
	return ((size_t (*)(void *, size_t, const void *, size_t))f)(dst, cap, src, n);
}
static unsigned s4d_zstd_is_error(void *f, size_t r) { return ((unsigned (*)(size_t))f)(r); }
*/
import "C"

import (
	"fmt"
	"unsafe"

	"github.com/s4d-project/s4d/backends/internal/dl"
)

// Decoders holds the C entry points; a nil one is a library not found.
type Decoders struct {
	lz4, zstd, zstdIsError unsafe.Pointer
	Missing                []string // why a library could not be used
}

// Open finds liblz4 and libzstd; what is missing is listed, not an error.
func Open() *Decoders {
	d := &Decoders{}
	if l, err := dl.Open("liblz4.so.1", "liblz4.so"); err != nil {
		d.Missing = append(d.Missing, err.Error())
	} else if err := l.Resolve([]dl.Entry{{Name: "LZ4_decompress_safe", Ptr: &d.lz4}}); err != nil {
		d.Missing = append(d.Missing, err.Error())
	}
	if l, err := dl.Open("libzstd.so.1", "libzstd.so"); err != nil {
		d.Missing = append(d.Missing, err.Error())
	} else if err := l.Resolve([]dl.Entry{{Name: "ZSTD_decompress", Ptr: &d.zstd}, {Name: "ZSTD_isError", Ptr: &d.zstdIsError}}); err != nil {
		d.zstd = nil
		d.Missing = append(d.Missing, err.Error())
	}
	return d
}

// HasLZ4 and HasZstd say whether that decoder was found.
func (d *Decoders) HasLZ4() bool  { return d.lz4 != nil }
func (d *Decoders) HasZstd() bool { return d.zstd != nil }

func ptr(b []byte) unsafe.Pointer {
	if len(b) == 0 {
		return nil
	}
	return unsafe.Pointer(&b[0])
}

// LZ4 decodes a raw LZ4 block into dst, which it must fill exactly.
func (d *Decoders) LZ4(src, dst []byte) error {
	n := C.s4d_lz4_decompress_safe(d.lz4, (*C.char)(ptr(src)), (*C.char)(ptr(dst)), C.int(len(src)), C.int(len(dst)))
	if int(n) != len(dst) {
		return fmt.Errorf("liblz4: LZ4_decompress_safe returned %d for a page of %d bytes", int(n), len(dst))
	}
	return nil
}

// Zstd decodes a zstd frame into dst, which it must fill exactly.
func (d *Decoders) Zstd(src, dst []byte) error {
	n := C.s4d_zstd_decompress(d.zstd, ptr(dst), C.size_t(len(dst)), ptr(src), C.size_t(len(src)))
	if C.s4d_zstd_is_error(d.zstdIsError, n) != 0 {
		return fmt.Errorf("libzstd: ZSTD_decompress failed (code %d)", uint64(n))
	}
	if int(n) != len(dst) {
		return fmt.Errorf("libzstd: ZSTD_decompress gave %d bytes for a page of %d", int(n), len(dst))
	}
	return nil
}
