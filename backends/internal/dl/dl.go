// Package dl loads shared libraries at run time (dlopen/dlsym), so s4d
// builds and starts on machines without GPU libraries and reports them
// missing instead of failing to link.
package dl

/*
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

// dlerror's message belongs to the calling OS thread, and a goroutine may
// resume on another thread between two cgo calls: each operation and the
// reading of its error are one C call, the message copied out before
// returning.
static void s4d_why(char *why, size_t n) {
	const char *e = dlerror();
	snprintf(why, n, "%s", e ? e : "unknown dynamic loader error");
}

static void *s4d_dlopen(const char *path, char *why, size_t n) {
	void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (h == NULL) s4d_why(why, n);
	return h;
}

// A symbol's value may be NULL: only dlerror tells a missing one apart.
static int s4d_dlsym(void *h, const char *name, void **p, char *why, size_t n) {
	dlerror();
	*p = dlsym(h, name);
	const char *e = dlerror();
	if (e == NULL) return 0;
	snprintf(why, n, "%s", e);
	return -1;
}

static int s4d_dlclose(void *h, char *why, size_t n) {
	if (dlclose(h) == 0) return 0;
	s4d_why(why, n);
	return -1;
}
*/
import "C"

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"unsafe"
)

// Lib is an opened library.
type Lib struct {
	Path string
	h    unsafe.Pointer
}

// reason holds the loader's message, copied out by the C side.
type reason [512]byte

func (r *reason) ptr() (*C.char, C.size_t) { return (*C.char)(unsafe.Pointer(&r[0])), C.size_t(len(r)) }

func (r *reason) String() string {
	if i := bytes.IndexByte(r[:], 0); i >= 0 {
		return string(r[:i])
	}
	return string(r[:])
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
		var r reason
		p, n := r.ptr()
		h := C.s4d_dlopen(cs, p, n)
		C.free(unsafe.Pointer(cs))
		if h != nil {
			return &Lib{Path: c, h: h}, nil
		}
		why = append(why, r.String())
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
	var r reason
	p, n := r.ptr()
	var sym unsafe.Pointer
	if C.s4d_dlsym(l.h, cs, &sym, p, n) != 0 {
		return nil, fmt.Errorf("%s: missing symbol %s (%s)", l.Path, name, r.String())
	}
	return sym, nil
}

// Entry is one symbol to resolve and the pointer its address goes into:
// a name and its destination in one row cannot fall out of step.
type Entry struct {
	Name string
	Ptr  *unsafe.Pointer
}

// Resolve fills every entry, stopping at the first missing symbol.
func (l *Lib) Resolve(entries []Entry) error {
	for _, e := range entries {
		p, err := l.Sym(e.Name)
		if err != nil {
			return err
		}
		*e.Ptr = p
	}
	return nil
}

// Close unloads the library. Only call it once nothing it returned is in use.
func (l *Lib) Close() error {
	var r reason
	p, n := r.ptr()
	if C.s4d_dlclose(l.h, p, n) != 0 {
		return errors.New(r.String())
	}
	return nil
}
