package client

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"time"

	"github.com/s4d-project/s4d/ipc"
	"golang.org/x/sys/unix"
)

// PageBuffer is memory shared with the daemon: pages written here are
// compressed straight from it by PutBuffer, without crossing the socket.
// It is a memfd sealed against shrinking, so the daemon can map it safely.
type PageBuffer struct {
	f   *os.File
	mem []byte
}

// NewPageBuffer makes a shared buffer of size bytes (a multiple of the page size).
func NewPageBuffer(size int) (*PageBuffer, error) {
	fd, err := unix.MemfdCreate("s4d-pages", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return nil, fmt.Errorf("memfd_create: %w", err)
	}
	f := os.NewFile(uintptr(fd), "s4d-pages")
	if err := unix.Ftruncate(fd, int64(size)); err != nil {
		f.Close()
		return nil, fmt.Errorf("memfd size: %w", err)
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_SHRINK|unix.F_SEAL_GROW|unix.F_SEAL_SEAL); err != nil {
		f.Close()
		return nil, fmt.Errorf("memfd seals: %w", err)
	}
	mem, err := unix.Mmap(fd, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("mmap: %w", err)
	}
	return &PageBuffer{f: f, mem: mem}, nil
}

// Fd is the memfd's descriptor.
func (p *PageBuffer) Fd() uintptr { return p.f.Fd() }

// Bytes is the buffer to fill with pages.
func (p *PageBuffer) Bytes() []byte { return p.mem }

// Close releases the buffer.
func (p *PageBuffer) Close() error {
	unix.Munmap(p.mem)
	return p.f.Close()
}

// PutBuffer stores len(keys) pages of buf, starting at byte offset off,
// without copying them through the socket. The pages must not change until
// it returns.
func (c *Client) PutBuffer(ctx context.Context, pool string, keys []uint64, buf *PageBuffer, off, pageSize int) ([]ipc.Code, error) {
	return c.bufferOp(ctx, ipc.OpPutFD, pool, keys, buf, off, pageSize)
}

// GetBuffer fetches the pages of keys into buf, page i at byte offset
// off + i*pageSize, without their crossing the socket. Pages whose code is
// not OK are left as they were.
func (c *Client) GetBuffer(ctx context.Context, pool string, keys []uint64, buf *PageBuffer, off, pageSize int) ([]ipc.Code, error) {
	return c.bufferOp(ctx, ipc.OpGetFD, pool, keys, buf, off, pageSize)
}

func (c *Client) bufferOp(ctx context.Context, op ipc.Op, pool string, keys []uint64, buf *PageBuffer, off, pageSize int) ([]ipc.Code, error) {
	if len(keys) == 0 || off < 0 || off+len(keys)*pageSize > len(buf.mem) {
		return nil, fmt.Errorf("%v: %d pages of %d bytes at %d do not fit in a %d-byte buffer", op, len(keys), pageSize, off, len(buf.mem))
	}
	cn, err := c.conn(ctx)
	if err != nil {
		return nil, err
	}
	var codes []ipc.Code
	err = cn.roundTrip(ctx, len(keys) <= quickPages, func(id uint64) error {
		head := ipc.AppendHeader(cn.wbuf[:0], ipc.Header{Version: ipc.Version, Op: op, ID: id}, 0)
		head = ipc.AppendPutFD(head, &ipc.PutFDRequest{Pool: pool, PageSize: uint32(pageSize), Keys: keys, Offset: uint64(off)})
		binary.LittleEndian.PutUint32(head, uint32(len(head)-4))
		cn.wbuf = head[:0]
		if cn.closed {
			return ErrConnLost
		}
		// The descriptor goes with the frame's first byte.
		return cn.sock.SendAll(time.Time{}, []int{int(buf.f.Fd())}, head)
	}, func(_ ipc.Header, body []byte, _ bool) (err error) {
		codes, err = ipc.DecodeCodes(body, len(keys))
		return err
	})
	return codes, err
}
