package ctl

import (
	"bytes"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"

	"github.com/s4d-project/s4d/cmd/s4d/exitcode"
	"github.com/s4d-project/s4d/ipc"
)

// `s4d ctl swap` lists devices with zramctl's columns by default and takes
// the flags of the other listings; no device prints nothing.
func TestSwapListing(t *testing.T) {
	devs := []ipc.SwapDevice{
		{Name: "/dev/ublkb0", DiskSize: 1 << 30, Data: 8 << 20, Compr: 2 << 20, Total: 3 << 20, Streams: 2, Priority: 100, Fresh: true},
		{Name: "/dev/ublkb1", DiskSize: 64 << 20, Streams: 1, Priority: -1},
	}
	run := func(devs []ipc.SwapDevice, args ...string) (string, error) {
		var out bytes.Buffer
		app := &cli.App{Name: "s4d", ExitErrHandler: func(*cli.Context, error) {}, Commands: []*cli.Command{{
			Name: "swap", Flags: SwapListFlags(),
			Action: func(cx *cli.Context) error {
				return PrintSwap(cx, &out, devs, map[string]bool{"/dev/ublkb0": true})
			}}}}
		err := app.Run(append([]string{"s4d", "swap"}, args...))
		return out.String(), err
	}
	out, err := run(devs)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if err != nil || len(lines) != 3 || strings.Join(strings.Fields(lines[0]), " ") != "NAME DISKSIZE DATA COMPR TOTAL STREAMS MOUNTPOINT" ||
		!strings.Contains(lines[1], "[SWAP]") || strings.Contains(lines[2], "[SWAP]") || !strings.Contains(lines[1], "1G") {
		t.Errorf("default listing (%v):\n%s", err, out)
	}
	out, err = run(devs, "--output", "name,ratio,priority,fresh", "--raw", "--noheadings")
	if want := "/dev/ublkb0 4.00 100 yes\n/dev/ublkb1 - - no\n"; err != nil || out != want {
		t.Errorf("--output name,ratio,priority,fresh --raw --noheadings (%v):\n%q, want %q", err, out, want)
	}
	out, err = run(devs, "-o", "disksize", "--bytes", "-n")
	if err != nil || strings.Fields(out)[0] != "1073741824" {
		t.Errorf("--bytes (%v): %q", err, out)
	}
	if out, err := run(nil); err != nil || out != "" {
		t.Errorf("no devices: %q %v", out, err)
	}
	if _, err := run(nil, "--output", "bogus"); exitcode.Of(err) != 2 {
		t.Errorf("--output bogus: %v, want a usage error", err)
	}
}
