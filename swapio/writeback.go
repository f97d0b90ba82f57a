package swapio

/*
#include "writeback.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Writeback: past Options.MemLimit of compressed bytes in RAM, a store's
// coldest pages go to Options.Writeback (writeback.c says how cold is
// told and why pages go whole): a block device, used whole and alone, as
// zram's backing_dev; or a directory, where the file is made without a
// name (O_TMPFILE), so that nothing is left behind by a crash (the pages
// in RAM die with the daemon too). The file is as large as the device
// and sparse; a block's place is its own, so the disk it takes is at
// most the device's size.

// writeback is a store's writeback, when it has one.
type writeback struct {
	w    *C.struct_s4d_wb
	fd   int
	mem  [][]byte // the thread's struct and stack, and the batch's pages
	page []byte   // one aligned page for Go's own reads of the file (Export)
}

const wbStack = 64 << 10

// tmpfsMagic is statfs's f_type of tmpfs and ramfs' kin: a file there is RAM.
const tmpfsMagic = 0x01021994

// openWriteback opens the block device, or makes the file in the
// directory, at path: O_DIRECT (pages pass the page cache by, which would
// only hold a second copy in RAM), at least size bytes long.
func openWriteback(path string, size uint64) (int, error) {
	var sta unix.Stat_t
	if err := unix.Stat(path, &sta); err != nil {
		return -1, fmt.Errorf("writeback: %w", err)
	}
	switch sta.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
		return openWritebackFile(path, size)
	case unix.S_IFBLK:
	default:
		return -1, fmt.Errorf("writeback %s: want a directory or a block device", path)
	}
	// O_EXCL: refused while mounted or held by another (swap on it, say).
	fd, err := unix.Open(path, unix.O_RDWR|unix.O_DIRECT|unix.O_CLOEXEC|unix.O_EXCL, 0)
	if err != nil {
		return -1, fmt.Errorf("writeback device %s: %w", path, err)
	}
	n, err := unix.IoctlGetUint64(fd, unix.BLKGETSIZE64)
	if err == nil && n < size {
		err = fmt.Errorf("%d bytes, less than the swap device's %d", n, size)
	}
	if err == nil {
		err = probeDirect(fd)
	}
	if err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("writeback device %s: %w", path, err)
	}
	return fd, nil
}

// probeDirect writes a page at 0 and reads it back: O_DIRECT refused
// (EINVAL) shows here, not at the first swap-in.
func probeDirect(fd int) error {
	probe, err := unix.Mmap(-1, 0, PageSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return err
	}
	defer unix.Munmap(probe)
	if _, err = unix.Pwrite(fd, probe, 0); err == nil {
		_, err = unix.Pread(fd, probe, 0)
	}
	if err != nil {
		return fmt.Errorf("direct I/O: %w", err)
	}
	return nil
}

func openWritebackFile(dir string, size uint64) (int, error) {
	var sfs unix.Statfs_t
	if err := unix.Statfs(dir, &sfs); err != nil {
		return -1, fmt.Errorf("writeback directory: %w", err)
	}
	if sfs.Type == tmpfsMagic {
		return -1, fmt.Errorf("writeback directory %s is on tmpfs: its pages would stay in RAM (or swap to this very device)", dir)
	}
	flags := unix.O_RDWR | unix.O_DIRECT | unix.O_CLOEXEC
	fd, err := unix.Open(dir, flags|unix.O_TMPFILE, 0o600)
	if errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.EISDIR) {
		// No O_TMPFILE on this filesystem: a named file, unlinked at once.
		var name string
		for i := 0; ; i++ {
			name = fmt.Sprintf("%s/.s4d-swap-%d-%d", dir, os.Getpid(), i)
			if fd, err = unix.Open(name, flags|unix.O_CREAT|unix.O_EXCL, 0o600); !errors.Is(err, unix.EEXIST) {
				break
			}
		}
		if err == nil {
			unix.Unlink(name)
		}
	}
	if err != nil {
		return -1, fmt.Errorf("writeback file in %s: %w", dir, err)
	}
	if err := unix.Ftruncate(fd, int64(size)); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("writeback file in %s: %w", dir, err)
	}
	if err := probeDirect(fd); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("writeback file in %s: %w", dir, err)
	}
	return fd, nil
}

// startWriteback gives st its writeback; called by NewStore before any
// queue serves the store.
func (st *Store) startWriteback(path string, limit uint64) error {
	fd, err := openWriteback(path, st.blocks*PageSize)
	if err != nil {
		return err
	}
	wb := &writeback{fd: fd}
	// Not locked: the thread is not on the I/O path; a page of it on its
	// way to the device is fetched back by the queues like any other.
	for _, n := range []int{int(unsafe.Sizeof(C.struct_s4d_wb{})), wbStack, C.S4D_WB_BATCH * PageSize, PageSize} {
		b, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
		if err != nil {
			wb.close()
			return err
		}
		wb.mem = append(wb.mem, b)
	}
	w := (*C.struct_s4d_wb)(unsafe.Pointer(&wb.mem[0][0]))
	w.s = st.s
	w.fd = C.int(fd)
	w.stack, w.stack_len = unsafe.Pointer(&wb.mem[1][0]), wbStack
	w.pages = (*C.char)(unsafe.Pointer(&wb.mem[2][0]))
	wb.page = wb.mem[3]
	w.limit = C.uint64_t(limit)
	wb.w = w
	st.s.wb_fd = C.int(fd)
	if e := C.s4d_wb_start(w); e != 0 {
		st.s.wb_fd = -1
		wb.w = nil
		wb.close()
		return fmt.Errorf("starting the swap writeback: %w", unix.Errno(-e))
	}
	st.wb = wb
	return nil
}

// stop ends the thread; the file stays open for reads until close.
func (wb *writeback) stop() {
	if wb.w != nil {
		C.s4d_wb_stop(wb.w)
	}
}

func (wb *writeback) close() {
	for _, b := range wb.mem {
		unix.Munmap(b)
	}
	wb.mem = nil
	if wb.fd >= 0 {
		unix.Close(wb.fd)
	}
}

// readFile reads a written-back block into page, checking its hash.
// Control plane only (Export): st.mu is not needed, writeback's own
// page serves one reader at a time (exportMu).
func (st *Store) readFile(block uint64, page []byte) error {
	var ref C.struct_s4d_fref
	if e := C.s4d_store_file(st.s, C.uint64_t(block), &ref); e != 0 {
		return unix.Errno(-e)
	}
	st.wbMu.Lock()
	defer st.wbMu.Unlock()
	buf := st.wb.page
	if _, err := unix.Pread(int(ref.fd), buf, int64(ref.off)); err != nil {
		return fmt.Errorf("block %d from the writeback file: %w", block, err)
	}
	if uint32(C.s4d_hash(unsafe.Pointer(&buf[0]))) != uint32(ref.hash) {
		return fmt.Errorf("block %d from the writeback file: %w", block, unix.EIO)
	}
	copy(page, buf)
	return nil
}

// SetMemLimit changes the compressed bytes kept in RAM (a store with
// writeback only; 0 stops moving pages).
func (st *Store) SetMemLimit(limit uint64) {
	if st.wb != nil {
		atomic.StoreUint64((*uint64)(unsafe.Pointer(&st.wb.w.limit)), limit)
	}
}

// WritebackErr says why the last write to the file failed (nil: none, or
// no writeback).
func (st *Store) WritebackErr() error {
	if st.wb == nil {
		return nil
	}
	if e := atomic.LoadInt32((*int32)(unsafe.Pointer(&st.wb.w.err))); e != 0 {
		return fmt.Errorf("swap writeback: %w", unix.Errno(e))
	}
	return nil
}

// writebackOnce moves one batch now (tests): pages moved.
func (st *Store) writebackOnce() (int, error) {
	n := int(C.s4d_wb_once(st.wb.w))
	if n < 0 {
		return 0, unix.Errno(-n)
	}
	return n, nil
}

// For the tests: a block's kind, one pick and one commit of the C side,
// and a page of the file overwritten.
const kindFile = C.S4D_FILE

func (st *Store) kind(block uint64) int { return int(C.s4d_store_kind(st.s, C.uint64_t(block))) }

func (st *Store) pick(hand *uint64, blocks, tokens []uint64) int {
	return int(C.s4d_store_wb_pick(st.s, (*C.uint64_t)(unsafe.Pointer(hand)), 1, (*C.uint64_t)(unsafe.Pointer(&blocks[0])),
		(*C.uint64_t)(unsafe.Pointer(&tokens[0])), (*C.char)(unsafe.Pointer(&st.wb.mem[2][0])), C.int(len(blocks))))
}

func (st *Store) commit(block, token uint64) bool {
	return C.s4d_store_wb_commit(st.s, C.uint64_t(block), C.uint64_t(token)) == 1
}

func (st *Store) corruptFile(block uint64, page []byte) error {
	st.wbMu.Lock()
	defer st.wbMu.Unlock()
	copy(st.wb.page, page)
	_, err := unix.Pwrite(st.wb.fd, st.wb.page, int64(block*PageSize))
	return err
}
