package ctl

import (
	"fmt"
	"io"
	"os"

	"github.com/s4d-project/s4d/ipc"
)

// pageFile is where `ctl get` writes pages as their replies arrive. On a
// regular file each page goes to its key's place and a page that did not
// come is never written, leaving a hole that reads as zeros and takes no
// space; on anything else (stdout, a pipe, a device) pages go out in order
// with zeros in place of the missing ones.
type pageFile struct {
	f       *os.File
	close   bool  // f was opened here
	seek    bool  // f is a regular file: write at offsets, leave holes
	written int64 // sequential output: bytes written so far
	zeros   []byte
}

// openPageFile opens path for writing, truncating it ("-": stdout).
func openPageFile(path string) (*pageFile, error) {
	if path == "-" {
		return &pageFile{f: os.Stdout}, nil
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	return &pageFile{f: f, close: true, seek: fi.Mode().IsRegular()}, nil
}

// write puts pages, the reply for keys at position at of the range, in
// place: page i of pages is the one of codes[i] when that is OK.
func (w *pageFile) write(at int, pages []byte, codes []ipc.Code, ps int) error {
	for i := 0; i < len(codes); {
		j := i + 1
		for j < len(codes) && (codes[j] == ipc.OK) == (codes[i] == ipc.OK) {
			j++
		}
		off := int64(at+i) * int64(ps)
		var err error
		switch {
		case codes[i] == ipc.OK && w.seek:
			_, err = w.f.WriteAt(pages[i*ps:j*ps], off)
		case codes[i] == ipc.OK:
			err = w.sequential(pages[i*ps : j*ps])
		case !w.seek:
			err = w.zero(int64(j-i) * int64(ps))
		}
		if err != nil {
			return err
		}
		i = j
	}
	return nil
}

func (w *pageFile) sequential(b []byte) error {
	n, err := w.f.Write(b)
	w.written += int64(n)
	return err
}

// zero writes n zero bytes in place of missing pages.
func (w *pageFile) zero(n int64) error {
	if w.zeros == nil {
		w.zeros = make([]byte, 64<<10)
	}
	for n > 0 {
		k := min(n, int64(len(w.zeros)))
		if err := w.sequential(w.zeros[:k]); err != nil {
			return err
		}
		n -= k
	}
	return nil
}

// finish makes the output size bytes long (missing pages at the end are a
// hole too) and closes it.
func (w *pageFile) finish(size int64) error {
	var err error
	if w.seek {
		err = w.f.Truncate(size)
	} else if w.written != size {
		err = fmt.Errorf("wrote %d bytes of %d", w.written, size)
	}
	if w.close {
		if cerr := w.f.Close(); err == nil {
			err = cerr
		}
	}
	return err
}

// readPages reads up to len(buf) bytes of whole pages from r: n is what
// was read, whole pages or not; io.EOF once nothing is left.
func readPages(r io.Reader, buf []byte) (int, error) {
	n, err := io.ReadFull(r, buf)
	if err == io.ErrUnexpectedEOF {
		err = nil // the last, short read: its length is checked by the caller
	}
	return n, err
}
