package dl

import (
	"strings"
	"testing"
)

func TestOpenAndSym(t *testing.T) {
	l, err := Open("libdoesnotexist.so.9", "libc.so.6")
	if err != nil {
		t.Fatal(err)
	}
	if l.Path != "libc.so.6" {
		t.Fatalf("loaded %s", l.Path)
	}
	if _, err := l.Sym("strlen"); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Sym("no_such_symbol_s4d"); err == nil || !strings.Contains(err.Error(), "no_such_symbol_s4d") {
		t.Fatalf("missing symbol: %v", err)
	}
}

func TestOpenMissing(t *testing.T) {
	_, err := Open("libnope1.so", "/nonexistent/libnope2.so")
	if err == nil || !strings.Contains(err.Error(), "libnope1.so") || !strings.Contains(err.Error(), "libnope2.so") {
		t.Fatalf("want both reasons, got %v", err)
	}
}
