package daemoncmd

import (
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// metricsFD is the FileDescriptorName= of s4d-metrics.socket.
const metricsFD = "metrics"

// metricsFromSystemd takes the socket named "metrics" (s4d-metrics.socket)
// out of the sockets systemd passed, and hands the rest on as if it had
// never been there: the daemon accepts exactly one passed socket, its own.
//
// A passed socket lets the sandboxed service (no network of its own, no IP
// sockets) serve /metrics on a loopback port that systemd opened for it.
// Without one it returns nil and changes nothing.
func metricsFromSystemd() (net.Listener, error) {
	if os.Getenv("LISTEN_PID") != strconv.Itoa(os.Getpid()) {
		return nil, nil
	}
	n, err := strconv.Atoi(os.Getenv("LISTEN_FDS"))
	if err != nil || n < 1 {
		return nil, nil
	}
	names := strings.Split(os.Getenv("LISTEN_FDNAMES"), ":")
	k := -1
	for i, name := range names {
		if name == metricsFD && i < n {
			k = i
		}
	}
	if k < 0 || len(names) != n {
		return nil, nil
	}
	// The passed sockets are fds 3 to 3+n-1 (sd_listen_fds(3)). Keep the
	// metrics one above that range, move the last into its place, and
	// shrink the range by one.
	const first = 3
	fd, last := first+k, first+n-1
	mfd, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, first+n)
	if err != nil {
		return nil, fmt.Errorf("socket activation: metrics socket: %w", err)
	}
	if fd != last {
		if err := unix.Dup2(last, fd); err != nil {
			unix.Close(mfd)
			return nil, fmt.Errorf("socket activation: metrics socket: %w", err)
		}
		names[k] = names[n-1]
	}
	unix.Close(last)
	os.Setenv("LISTEN_FDS", strconv.Itoa(n-1))
	os.Setenv("LISTEN_FDNAMES", strings.Join(names[:n-1], ":"))
	f := os.NewFile(uintptr(mfd), metricsFD)
	defer f.Close()
	ln, err := net.FileListener(f)
	if err != nil {
		return nil, fmt.Errorf("socket activation: metrics socket: %w", err)
	}
	return ln, nil
}
