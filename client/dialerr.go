package client

import (
	"errors"
	"fmt"
	"os"
	"os/user"
	"strconv"
	"syscall"
)

// SocketGroup is the group the packaged units give the socket
// (systemd/s4d.sysusers, SocketGroup= in s4d.socket): its members may
// use the daemon.
const SocketGroup = "s4d"

// DialError says the daemon could not be reached, and what to do about it.
type DialError struct {
	Socket string
	Err    error
	// Why the path could not be used, when that is not the daemon being
	// down: it names the group to join, or says the path is a directory.
	// Empty: the advice is how to start the daemon.
	Hint string
}

func (e *DialError) Error() string {
	if e.Hint != "" {
		return fmt.Sprintf("s4d is not reachable at %s (%v): %s", e.Socket, e.Err, e.Hint)
	}
	return fmt.Sprintf("s4d is not reachable at %s (%v); start it with 'systemctl start s4d' or 's4d daemon --socket %s'",
		e.Socket, e.Err, e.Socket)
}

func (e *DialError) Unwrap() error { return e.Err }

// dialError builds the DialError for a failed connect to path. Starting
// the daemon is the wrong advice when the daemon runs but the socket may
// not be opened, or when the path is not a socket at all (connecting to a
// directory says only "connection refused").
func dialError(path string, err error) *DialError {
	de := &DialError{Socket: path, Err: unwrapOp(err)}
	fi, statErr := os.Stat(path)
	switch {
	case errors.Is(err, syscall.EACCES) || errors.Is(err, syscall.EPERM):
		de.Hint = permissionHint(fi, statErr)
	case statErr == nil && fi.IsDir():
		de.Hint = "it is a directory; give the socket's own path (the default is " + DefaultSocket() + ")"
	case statErr == nil && fi.Mode()&os.ModeSocket == 0:
		de.Hint = "it is not a socket; give the path of s4d's socket (the default is " + DefaultSocket() + ")"
	}
	return de
}

// permissionHint names the group whose members may open the socket: its
// own group when it can be read, the packaged one otherwise (a directory
// on the way that we may not search hides it).
func permissionHint(fi os.FileInfo, statErr error) string {
	group := SocketGroup
	if statErr == nil {
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			if st.Gid == 0 {
				return "only root may use this socket; the packaged units give it to group " + SocketGroup +
					" (SocketGroup=" + SocketGroup + " in s4d.socket): run as root or start s4d that way"
			}
			group = strconv.FormatUint(uint64(st.Gid), 10)
			if g, err := user.LookupGroupId(group); err == nil {
				group = g.Name
			}
		}
	}
	return fmt.Sprintf("permission denied: join group %s to use it (sudo usermod -aG %s $USER, then log in again)", group, group)
}
