package exitcode

import (
	"errors"
	"fmt"
	"net"
	"os"
	"syscall"
	"testing"

	"github.com/s4d-project/s4d/client"
	"github.com/s4d-project/s4d/ipc"
)

func TestOf(t *testing.T) {
	dial := func(errno syscall.Errno) error {
		return &client.DialError{Socket: "/x", Err: &net.OpError{Op: "dial", Net: "unix", Err: os.NewSyscallError("connect", errno)}}
	}
	for _, c := range []struct {
		err  error
		want int
	}{
		{nil, OK},
		{errors.New("boom"), Failure},
		{UsageErr(errors.New("bad flag")), Usage},
		{fmt.Errorf("inspect: %w", &ipc.Error{Code: ipc.CodeNotFound}), NotFound},
		{&ipc.Error{Code: ipc.CodePermission}, Permission},
		{dial(syscall.EACCES), Permission},
		{dial(syscall.ENOENT), Unreachable},
		{dial(syscall.ECONNREFUSED), Unreachable},
		{fmt.Errorf("get: %w", client.ErrConnLost), Unreachable},
		{&ipc.Error{Code: ipc.CodeNoSpace}, Failure},
		{fmt.Errorf("put: %w", &ipc.Error{Code: ipc.CodeBadPool}), Usage},
	} {
		if got := Of(c.err); got != c.want {
			t.Errorf("Of(%v) = %d, want %d", c.err, got, c.want)
		}
	}
	if UsageErr(nil) != nil {
		t.Error("UsageErr(nil) is not nil")
	}
}
