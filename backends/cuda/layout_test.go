package cuda

import (
	"testing"
	"unsafe"

	"github.com/s4d-project/s4d/backends"
	"github.com/s4d-project/s4d/backends/cuda/cu"
)

// The Go copies of nvCOMP's option structs must match the C declarations
// byte for byte: they are passed by value, and a misplaced field would
// silently select another data type or decompression backend.
func TestOptionLayout(t *testing.T) {
	var lc lz4CompressOpts
	var ld lz4DecompressOpts
	for _, c := range []struct {
		name      string
		got, want uintptr
	}{
		{"sizeof lz4 compress opts", unsafe.Sizeof(lc), cu.CLayout(0)},
		{"offsetof lz4 compress bitshuffle_mode", unsafe.Offsetof(lc.Bitshuffle), cu.CLayout(1)},
		{"sizeof lz4 decompress opts", unsafe.Sizeof(ld), cu.CLayout(2)},
		{"offsetof lz4 decompress data_type", unsafe.Offsetof(ld.DataType), cu.CLayout(3)},
		{"offsetof lz4 decompress bitshuffle_mode", unsafe.Offsetof(ld.Bitshuffle), cu.CLayout(4)},
		{"sizeof zstd compress opts", unsafe.Sizeof(zstdCompressOpts{}), cu.CLayout(5)},
		{"sizeof zstd decompress opts", unsafe.Sizeof(zstdDecompressOpts{}), cu.CLayout(6)},
		{"sizeof alignment requirements", unsafe.Sizeof(cu.Alignment{}), cu.CLayout(7)},
		{"sizeof nvcomp opts", unsafe.Sizeof(cu.Opts{}), 64},
	} {
		if c.got != c.want {
			t.Errorf("%s: Go %d, C %d", c.name, c.got, c.want)
		}
	}
	// Defaults are all zero bytes.
	for _, o := range []cu.Opts{lz4C, lz4D, zstdC, zstdD} {
		if o != (cu.Opts{}) {
			t.Errorf("default options not zero: %v", o)
		}
	}
}

func TestLayoutRegions(t *testing.T) {
	for _, p := range []int{1, 16, 255, 4096} {
		l := newLayout(p)
		offs := []int{l.inPtr, l.inSize, l.outPtr, l.bufSize, l.outSize, l.status, l.need, l.pos,
			l.err, l.fill, l.offs, l.psize, l.cls, l.total}
		for i := 1; i < len(offs); i++ {
			if offs[i] <= offs[i-1] || offs[i]%256 != 0 {
				t.Fatalf("pages %d: region %d at %d after %d", p, i, offs[i], offs[i-1])
			}
		}
		// Regions sized for p entries must not overlap the next one.
		if l.inSize-l.inPtr < 8*p || l.need-l.status < 4*p || l.offs-l.fill < 8*p || l.total-l.cls < p ||
			l.psize-l.offs < 4*(p+1) || l.meta != l.err {
			t.Fatalf("pages %d: regions too small: %+v", p, l)
		}
	}
}

func TestNvcompCandidates(t *testing.T) {
	if c := nvcompCandidates("/x/libnvcomp.so.6"); len(c) != 1 || c[0] != "/x/libnvcomp.so.6" {
		t.Errorf("explicit path: %v", c)
	}
	// The environment reaches the engine through Options (FromEnv) only.
	t.Setenv("S4D_NVCOMP_LIB", "/y/libnvcomp.so.5")
	if o := backends.FromEnv(backends.Options{}); o.NvcompLib != "/y/libnvcomp.so.5" {
		t.Errorf("env path: %q", o.NvcompLib)
	}
	if c := nvcompCandidates(""); len(c) < 2 || c[0] != "libnvcomp.so.6" || c[1] != "libnvcomp.so.5" {
		t.Errorf("search: %v", c)
	}
}
