package swapcmd

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"

	"github.com/s4d-project/s4d/cmd/s4d/exitcode"
)

// `s4d swap delete` needs a device or --all (a bare del used to delete every
// device), and `swap on --priority` takes only what swapon can: each is
// refused as a usage error before the daemon is asked. The socket named
// does not exist, so reaching the daemon would fail otherwise (exit 5).
func TestSwapUsage(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "none.sock")
	for _, c := range []struct {
		args []string
		want int
		says string
	}{
		{[]string{"delete"}, 2, "--all"},
		{[]string{"delete", "--all", "/dev/ublkb0"}, 2, "not both"},
		{[]string{"delete", "/dev/ublkb0", "/dev/ublkb1"}, 2, "one device"},
		{[]string{"delete", "--all"}, 5, ""},
		{[]string{"delete", "/dev/ublkb0"}, 5, ""},
		{[]string{"on", "--priority", "-5", "/dev/ublkb0"}, 2, "0-32767"},
		{[]string{"on", "--priority", "40000", "/dev/ublkb0"}, 2, "0-32767"},
	} {
		app := &cli.App{Name: "s4d", Commands: []*cli.Command{Command}, ExitErrHandler: func(*cli.Context, error) {}}
		args := append([]string{"s4d", "swap", c.args[0], "--socket", sock}, c.args[1:]...)
		err := app.Run(args)
		if got := exitcode.Of(err); got != c.want || err != nil && !strings.Contains(err.Error(), c.says) {
			t.Errorf("swap %s: exit %d (%v), want %d saying %q", strings.Join(c.args, " "), got, err, c.want, c.says)
		}
	}
}
