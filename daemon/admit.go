package daemon

import (
	"encoding/binary"
	"fmt"
	"net"

	"golang.org/x/sys/unix"

	"github.com/s4d-project/s4d/clientmem"
	"github.com/s4d-project/s4d/ipc"
)

// Admitting connections: peer credentials, the connection limits, and the
// answer to one that is refused.

// accept admits a connection, or tells it why not and closes it at once.
func (d *Daemon) accept(nc *net.UnixConn) {
	cred, err := peerCred(nc)
	if err != nil {
		d.log.Warn("peer credentials", "err", err)
		nc.Close()
		return
	}
	if msg := d.admit(cred.Uid); msg != "" {
		d.refuse(nc, msg)
		return
	}
	c := d.newConn(cred.Uid, cred.Pid)
	if err := c.initIO(nc); err != nil {
		d.log.Warn("connection", "err", err)
		nc.Close()
		d.leave(c.uid)
		return
	}
	c.maps = clientmem.NewCache(d.maps)
	d.mu.Lock()
	d.live[c] = struct{}{}
	d.mu.Unlock()
	d.conns.Add(1)
	go c.loop()
}

// newConn is a connection of a client uid (process pid) to this daemon.
func (d *Daemon) newConn(uid uint32, pid int32) *conn {
	return &conn{d: d, pages: d.store, engines: d.router, uid: uid, pid: pid}
}

// admit counts a new connection of uid, or says which limit refuses it.
func (d *Daemon) admit(uid uint32) string {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.active.Load() >= int64(d.cfg.MaxConns) {
		return fmt.Sprintf("too many connections (limit %d)", d.cfg.MaxConns)
	}
	if per := d.cfg.ConnsPerUser(); d.perUser[uid] >= per {
		return fmt.Sprintf("too many connections of user %d (limit %d per user)", uid, per)
	}
	d.active.Add(1)
	d.perUser[uid]++
	return ""
}

// leave undoes admit.
func (d *Daemon) leave(uid uint32) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.active.Add(-1)
	if d.perUser[uid]--; d.perUser[uid] <= 0 {
		delete(d.perUser, uid)
	}
}

// refuse answers a connection that is not admitted with LIMIT and closes
// it. The frame is small and the socket's buffer empty, so it goes out
// at once; a peer that cannot take it is not waited for.
func (d *Daemon) refuse(nc *net.UnixConn, msg string) {
	d.refused.Add(1)
	d.log.Debug("connection refused", "reason", msg)
	body := binary.LittleEndian.AppendUint16(nil, uint16(len(msg)))
	frame := ipc.Frame(ipc.Header{Version: ipc.Version, Status: ipc.CodeLimit, Flags: ipc.FlagResponse}, append(body, msg...))
	// One non-blocking write, however long this goroutine waits to run
	// (a write deadline could pass before the write is tried).
	if raw, err := nc.SyscallConn(); err == nil {
		raw.Write(func(fd uintptr) bool {
			unix.SendmsgN(int(fd), frame, nil, nil, unix.MSG_DONTWAIT|unix.MSG_NOSIGNAL)
			return true
		})
	}
	nc.Close()
}

func peerCred(nc *net.UnixConn) (*unix.Ucred, error) {
	raw, err := nc.SyscallConn()
	if err != nil {
		return nil, err
	}
	var cred *unix.Ucred
	var cerr error
	if err := raw.Control(func(fd uintptr) {
		cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return nil, err
	}
	return cred, cerr
}
