package cu

import (
	"unsafe"

	"github.com/s4d-project/s4d/backends/internal/dl"
)

// Load finds the driver API's entry points in l (libcuda.so.1).
func (d *Driver) Load(l *dl.Lib) error { return l.Syms(driverSyms, d.ptrs()) }

// Load finds nvCOMP's own entry points in l: the version is required, the
// text of statuses is not.
func (n *Nvcomp) Load(l *dl.Lib) error {
	var err error
	if n.props, err = l.Sym("nvcompGetProperties"); err != nil {
		return err
	}
	n.statusString, _ = l.Sym("nvcompGetStatusString")
	return nil
}

// Load finds the batched API of codec name ("LZ4", "Zstd") in l.
func (c *Codec) Load(l *dl.Lib, name string) error {
	c.Name = name
	p := "nvcompBatched" + name
	// 6.x renamed ...GetTempSizeAsync to ...GetTempSize and gave it a
	// stream argument; the symbol present says which one this is.
	var err error
	if c.compTemp, err = l.Sym(p + "CompressGetTempSize"); err == nil {
		c.tempHasStream = true
		c.decompTemp, err = l.Sym(p + "DecompressGetTempSize")
	} else if c.compTemp, err = l.Sym(p + "CompressGetTempSizeAsync"); err == nil {
		c.decompTemp, err = l.Sym(p + "DecompressGetTempSizeAsync")
	}
	if err != nil {
		return err
	}
	return l.Syms([]string{p + "CompressGetRequiredAlignments", p + "DecompressGetRequiredAlignments",
		p + "CompressGetMaxOutputChunkSize", p + "CompressAsync", p + "DecompressAsync"},
		[]*unsafe.Pointer{&c.compAlign, &c.decompAlign, &c.maxOut, &c.compress, &c.decompress})
}
