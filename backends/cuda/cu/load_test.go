package cu

import (
	"strings"
	"testing"
	"unsafe"

	"github.com/s4d-project/s4d/backends/internal/dl"
)

func TestDriverTableCoversStruct(t *testing.T) {
	var d Driver
	if err := checkCovers("driver", unsafe.Pointer(&d), d.pointers(), d.table()); err != nil {
		t.Fatal(err)
	}
}

func TestCheckCoversRefusesGaps(t *testing.T) {
	var d Driver
	full := d.table()
	short := full[:len(full)-1]
	if err := checkCovers("driver", unsafe.Pointer(&d), d.pointers(), short); err == nil || !strings.Contains(err.Error(), "names for") {
		t.Fatalf("a missing row: %v", err)
	}
	// Same length, one field filled twice and another never.
	twice := append([]dl.Entry(nil), full...)
	twice[1].Ptr = twice[0].Ptr
	if err := checkCovers("driver", unsafe.Pointer(&d), d.pointers(), twice); err == nil || !strings.Contains(err.Error(), twice[1].Name) {
		t.Fatalf("a field filled twice: %v", err)
	}
	var other unsafe.Pointer
	stray := append([]dl.Entry(nil), full...)
	stray[2].Ptr = &other
	if err := checkCovers("driver", unsafe.Pointer(&d), d.pointers(), stray); err == nil {
		t.Fatal("a row pointing outside the struct was accepted")
	}
}

func TestDriverLoadNamesMissingSymbol(t *testing.T) {
	// libc has none of the driver's symbols: the load stops at the first.
	l, err := dl.Open("libc.so.6")
	if err != nil {
		t.Skip(err)
	}
	var d Driver
	if err := d.Load(l); err == nil || !strings.Contains(err.Error(), "cuInit") {
		t.Fatalf("want cuInit missing, got %v", err)
	}
}

func TestStatusText(t *testing.T) {
	var n Nvcomp // no status strings loaded: the number alone
	if err := n.Status(-3, "LZ4 CompressAsync"); err == nil || err.Error() != "LZ4 CompressAsync: status -3" {
		t.Fatalf("got %v", err)
	}
	if err := n.Status(0, "x"); err != nil {
		t.Fatalf("status 0: %v", err)
	}
}
