// Package dl loads shared libraries at run time (dlopen/dlsym), so s4d
// builds and starts on machines without GPU libraries and reports them
// missing instead of failing to link.
package dl

/*
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <stdlib.h>
*/
import "C"

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"unsafe"
)

// dlerror's buffer is per thread but calls may migrate between threads:
// serialise open/sym/error so each error belongs to its call.
var mu sync.Mutex

// Lib is an opened library.
type Lib struct {
	Path string
	h    unsafe.Pointer
}

// Open tries each candidate (an absolute path or a soname) in order and
// returns the first that loads. The error lists why each one failed.
func Open(candidates ...string) (*Lib, error) {
	var why []string
	for _, c := range candidates {
		if c == "" {
			continue
		}
		cs := C.CString(c)
		mu.Lock()
		h := C.dlopen(cs, C.RTLD_NOW|C.RTLD_LOCAL)
		var msg string
		if h == nil {
			msg = C.GoString(C.dlerror())
		}
		mu.Unlock()
		C.free(unsafe.Pointer(cs))
		if h != nil {
			return &Lib{Path: c, h: h}, nil
		}
		why = append(why, msg)
	}
	if len(why) == 0 {
		return nil, errors.New("no library candidates")
	}
	return nil, errors.New(strings.Join(why, "; "))
}

// Sym returns the address of an exported symbol.
func (l *Lib) Sym(name string) (unsafe.Pointer, error) {
	cs := C.CString(name)
	defer C.free(unsafe.Pointer(cs))
	mu.Lock()
	defer mu.Unlock()
	C.dlerror()
	p := C.dlsym(l.h, cs)
	if p == nil {
		return nil, fmt.Errorf("%s: missing symbol %s", l.Path, name)
	}
	return p, nil
}

// Syms resolves every name into the matching pointer, stopping at the
// first missing one.
func (l *Lib) Syms(names []string, ptrs []*unsafe.Pointer) error {
	for i, n := range names {
		p, err := l.Sym(n)
		if err != nil {
			return err
		}
		*ptrs[i] = p
	}
	return nil
}

// Close unloads the library. Only call it once nothing it returned is in use.
func (l *Lib) Close() error {
	mu.Lock()
	defer mu.Unlock()
	if C.dlclose(l.h) != 0 {
		return errors.New(C.GoString(C.dlerror()))
	}
	return nil
}
