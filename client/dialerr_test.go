package client

import (
	"context"
	"errors"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// A path that is not the daemon's socket says what it is, not "connection
// refused" and how to start a daemon (issue 26).
func TestDialErrorSaysWhatThePathIs(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "f")
	os.WriteFile(file, nil, 0o644)
	for path, want := range map[string]string{dir: "is a directory", file: "is not a socket"} {
		_, err := (&Client{Socket: path}).Hello(context.Background())
		var de *DialError
		if !errors.As(err, &de) || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "systemctl start") {
			t.Errorf("dial %s: %v; want a DialError saying it %s", path, err, want)
		}
	}
	// Nothing there: the daemon is down, and the advice is to start it.
	_, err := (&Client{Socket: filepath.Join(dir, "none.sock")}).Hello(context.Background())
	if err == nil || !strings.Contains(err.Error(), "systemctl start s4d") {
		t.Errorf("no socket: %v", err)
	}
}

// Permission denied names the group to join: the socket's own, or for a
// root-only socket the group the packaged units use. (tests/ checks the
// whole path, dialling as another user.)
func TestPermissionHintNamesTheGroup(t *testing.T) {
	f := filepath.Join(t.TempDir(), "s.sock")
	os.WriteFile(f, nil, 0o660)
	if os.Getuid() == 0 {
		os.Chown(f, 0, 0)
		fi, err := os.Stat(f)
		if h := permissionHint(fi, err); !strings.Contains(h, "only root may use this socket") || !strings.Contains(h, "group s4d") {
			t.Errorf("root-only socket: %s", h)
		}
		os.Chown(f, 0, 4343) // a group with no name here: its number is named
	}
	fi, err := os.Stat(f)
	if err != nil {
		t.Fatal(err)
	}
	gid := strconv.Itoa(int(fi.Sys().(*syscall.Stat_t).Gid))
	want := "join group " + gid
	if g, err := user.LookupGroupId(gid); err == nil {
		want = "join group " + g.Name
	}
	if h := permissionHint(fi, nil); gid != "0" && !strings.Contains(h, want) {
		t.Errorf("socket of group %s: %s, want %q", gid, h, want)
	}
	// The socket's group unknown (a directory on the way hides it): the
	// packaged group.
	if h := permissionHint(nil, os.ErrPermission); !strings.Contains(h, "join group s4d") {
		t.Errorf("unknown group: %s", h)
	}
}

// The group the advice names is the one the packaged units give the
// socket and create.
func TestSocketGroupIsTheUnits(t *testing.T) {
	unit, err := os.ReadFile("../systemd/s4d.socket")
	if err != nil {
		t.Fatal(err)
	}
	users, err := os.ReadFile("../systemd/s4d.sysusers")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(unit), "\nSocketGroup="+SocketGroup+"\n") || !strings.Contains(string(users), "\ng "+SocketGroup+" ") {
		t.Errorf("SocketGroup %q is not s4d.socket's SocketGroup= or a group of s4d.sysusers", SocketGroup)
	}
}
