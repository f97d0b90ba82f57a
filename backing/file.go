// Package backing keeps compressed pages in a backing file or block
// device: a versioned header, an allocator that packs many page objects
// into each aligned block, batched O_DIRECT reads and writes, and the
// checkpoint index that lets pages outlive the daemon.
package backing

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// minBlocks is the smallest file taken: headers and room to be useful.
const minBlocks = 64

// ErrFull is returned when the file has no room left.
var ErrFull = errors.New("backing file full")

// File is an open backing file. It is safe for concurrent use.
type File struct {
	path     string
	f        *os.File
	fd       int
	pageSize int
	hdr      header
	next     int  // header copy the next checkpoint writes
	verify   bool // read every write back (SetVerify)

	mu    sync.Mutex
	a     allocator
	index [2]uint64 // blocks held by the last checkpoint's index (start, n)
	cp    sync.Mutex

	st counters
}

// Open opens the backing file at path for pages of pageSize bytes. With
// persist, the last checkpoint's index is returned (nil on a fresh file)
// and a file that cannot be read as ours is refused untouched; without,
// the file is formatted afresh unless it holds something not ours.
func Open(path string, pageSize int, persist bool) (*File, *Index, error) {
	f, err := os.OpenFile(path, os.O_RDWR|unix.O_DIRECT|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, nil, openError(path, err)
	}
	bf := &File{path: path, f: f, fd: int(f.Fd()), pageSize: pageSize}
	idx, err := bf.load(persist)
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return bf, idx, nil
}

func openError(path string, err error) error {
	switch {
	case errors.Is(err, syscall.EINVAL):
		return fmt.Errorf("backing file %s: its filesystem does not support O_DIRECT (tmpfs does not): use a file on a disk filesystem or a block device", path)
	case errors.Is(err, syscall.EROFS), errors.Is(err, syscall.EACCES), errors.Is(err, syscall.EPERM):
		return fmt.Errorf("backing file %s: cannot open it for writing (read-only file or filesystem?): %w", path, err)
	case errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("backing file %s does not exist: create it first (fallocate -l 1G %s) or name a block device", path, path)
	}
	return fmt.Errorf("backing file %s: %w", path, err)
}

func (bf *File) load(persist bool) (*Index, error) {
	size, err := bf.f.Seek(0, io.SeekEnd)
	if err != nil {
		return nil, fmt.Errorf("backing file %s: size: %w", bf.path, err)
	}
	fi, err := bf.f.Stat()
	if err != nil {
		return nil, err
	}
	if m := fi.Mode(); !m.IsRegular() && m&os.ModeDevice == 0 {
		return nil, fmt.Errorf("backing file %s: not a regular file or block device", bf.path)
	}
	blocks := uint64(size) / BlockSize
	if blocks < minBlocks {
		return nil, fmt.Errorf("%w: %s holds %d bytes; at least %d are needed", errTooSmall, bf.path, size, minBlocks*BlockSize)
	}
	buf := alignedBuf(headerBlocks * BlockSize)
	if err := bf.readAt(buf, 0); err != nil {
		return nil, fmt.Errorf("backing file %s: reading the header: %w", bf.path, err)
	}
	var hs [2]header
	var errs [2]error
	for i := range hs {
		hs[i], errs[i] = decodeHeader(buf[i*BlockSize : (i+1)*BlockSize])
	}
	for _, e := range errs {
		if errors.Is(e, errNotOurs) {
			return nil, fmt.Errorf("backing file %s is left untouched: %w; to give it to s4d, zero its first 8 KiB (dd if=/dev/zero of=%s bs=4096 count=2 conv=notrunc)", bf.path, e, bf.path)
		}
	}
	if errs[0] == errBlank && errs[1] == errBlank || !persist {
		if err := bf.format(blocks); err != nil || !persist {
			return nil, err
		}
		bf.a.quarantine = true
		return &Index{}, nil
	}
	// The newest copy that reads; a version mismatch is never skipped over.
	best := -1
	for i := range hs {
		if errors.Is(errs[i], errVersion) {
			return nil, fmt.Errorf("backing file %s is left untouched: %w", bf.path, errs[i])
		}
		if errs[i] == nil && (best < 0 || hs[i].Seq > hs[best].Seq) {
			best = i
		}
	}
	if best < 0 {
		e := errs[0]
		if e == errBlank {
			e = errs[1]
		}
		return nil, fmt.Errorf("backing file %s is left untouched: %w", bf.path, e)
	}
	h := hs[best]
	if int(h.PageSize) != bf.pageSize {
		return nil, fmt.Errorf("backing file %s is left untouched: it holds pages of %d bytes, this daemon stores %d", bf.path, h.PageSize, bf.pageSize)
	}
	if h.Blocks != blocks {
		return nil, fmt.Errorf("backing file %s is left untouched: it was %d bytes when written and is %d now", bf.path, h.Blocks*BlockSize, size)
	}
	bf.hdr, bf.next = h, 1-best
	bf.a.init(blocks, true)
	if h.IndexOff == 0 {
		return &Index{}, nil
	}
	n := (h.IndexLen + BlockSize - 1) / BlockSize
	ib := alignedBuf(int(n * BlockSize))
	if err := bf.readAt(ib, int64(h.IndexOff)); err != nil {
		return nil, fmt.Errorf("backing file %s: reading the index: %w", bf.path, err)
	}
	ib = ib[:h.IndexLen]
	if crcOf(ib) != h.IndexSum {
		return nil, fmt.Errorf("backing file %s is left untouched: %w: index checksum mismatch", bf.path, errDamaged)
	}
	idx, err := DecodeIndex(ib)
	if err != nil {
		return nil, fmt.Errorf("backing file %s is left untouched: %w", bf.path, err)
	}
	bf.index = [2]uint64{h.IndexOff / BlockSize, n}
	bf.a.hold(bf.index[0], n)
	return idx, nil
}

// format writes a fresh header to both copies.
func (bf *File) format(blocks uint64) error {
	shift := uint32(4)
	for blocks*BlockSize>>shift > 1<<32-1 {
		shift++
	}
	bf.hdr = header{Version: FormatVersion, PageSize: uint32(bf.pageSize), Blocks: blocks, UnitShift: shift}
	buf := alignedBuf(headerBlocks * BlockSize)
	h := bf.hdr.encode()
	copy(buf, h)
	copy(buf[BlockSize:], h)
	if err := bf.writeAt(buf, 0); err != nil {
		return fmt.Errorf("backing file %s: writing the header: %w", bf.path, err)
	}
	if err := bf.f.Sync(); err != nil {
		return fmt.Errorf("backing file %s: sync: %w", bf.path, err)
	}
	bf.a.init(blocks, false)
	return nil
}

// SetPersist turns the quarantine of freed blocks on: from now on the
// file's checkpoints must stay readable after a crash.
func (bf *File) SetPersist() {
	bf.mu.Lock()
	bf.a.quarantine = true
	bf.mu.Unlock()
}

// SetVerify makes every write be read back and compared before it counts
// as done. Call it before the file is used.
func (bf *File) SetVerify(on bool) { bf.verify = on }

// Unit is the size of a handle's step in bytes: an object's handle is its
// offset divided by it.
func (bf *File) Unit() uint64 { return 1 << bf.hdr.UnitShift }

// Size is the file's size in bytes.
func (bf *File) Size() uint64 { return bf.hdr.Blocks * BlockSize }

// Path is the file's name.
func (bf *File) Path() string { return bf.path }

// Seq is the number of the checkpoint the file holds now (0: none yet).
// A checkpoint changes it: read it when none can run, right after Open or
// once the last one is written.
func (bf *File) Seq() uint64 { return bf.hdr.Seq }

// Close closes the file.
func (bf *File) Close() error { return bf.f.Close() }

// Restore counts an object recorded in a checkpoint as live; false if it
// lies outside the file or on blocks that cannot hold it (damage).
func (bf *File) Restore(off uint64, size int) bool {
	bf.mu.Lock()
	defer bf.mu.Unlock()
	end := off + uint64(size)
	if off < headerBlocks*BlockSize || off%bf.Unit() != 0 || end > bf.Size() || size <= 0 {
		return false
	}
	for b := off / BlockSize; b*BlockSize < end; b++ {
		lo, hi := max(off, b*BlockSize), min(end, (b+1)*BlockSize)
		if w := bf.a.live[b]; w == markHeld || uint64(w)+hi-lo > BlockSize {
			return false
		}
	}
	bf.a.use(off, size)
	return true
}

func (bf *File) readAt(b []byte, off int64) error {
	if err := fault("read"); err != nil {
		return err
	}
	for len(b) > 0 {
		n, err := unix.Pread(bf.fd, b, off)
		if err != nil {
			return err
		}
		if n == 0 {
			return io.ErrUnexpectedEOF
		}
		b, off = b[n:], off+int64(n)
	}
	return nil
}

func (bf *File) writeAt(b []byte, off int64) error {
	if err := fault("write"); err != nil {
		return err
	}
	for len(b) > 0 {
		n, err := unix.Pwrite(bf.fd, b, off)
		if err != nil {
			return err
		}
		if n == 0 {
			return io.ErrShortWrite
		}
		b, off = b[n:], off+int64(n)
	}
	return nil
}

// alignedBuf returns n zeroed bytes aligned for O_DIRECT.
func alignedBuf(n int) []byte {
	b := make([]byte, n+BlockSize)
	a := int(addr(b) & (BlockSize - 1))
	if a != 0 {
		a = BlockSize - a
	}
	return b[a : a+n : a+n]
}
