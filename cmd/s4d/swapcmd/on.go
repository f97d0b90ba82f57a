package swapcmd

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"unsafe"

	"github.com/urfave/cli/v2"
	"golang.org/x/sys/unix"

	"github.com/s4d-project/s4d/cmd/s4d/exitcode"
	"github.com/s4d-project/s4d/ipc"
	"github.com/s4d-project/s4d/settings"
	"github.com/s4d-project/s4d/ublk"
)

// `s4d swap on` and `off` are what systemd/s4d-swap@.service runs for each
// device the daemon creates, as zram-generator's units do for zram: mkswap
// only on a device the daemon says is fresh (never on one reattached with
// pages in use: that would throw away every process's swapped memory),
// then swapon with the [[swap]] table's priority and discard. A device
// with no priority of its own (made by `s4d swap add`) gets
// settings.DefaultSwapPriority, above disk swap, as zram-generator's do.

var onCommand = &cli.Command{
	Name:      "on",
	Usage:     "make a device of the daemon's swap: mkswap if it is fresh, then swapon with its priority",
	UsageText: "s4d swap on [--priority N] DEVICE",
	Flags: append([]cli.Flag{&cli.IntFlag{Name: "priority", Value: -1, DefaultText: "the [[swap]] table's, else 100",
		Usage: "swap priority, 0-32767 (higher is used first; disk swap has -2 and below)"}}, flags...),
	Action: func(cx *cli.Context) error {
		prio := cx.Int("priority")
		if cx.IsSet("priority") && (prio < 0 || prio > 32767) {
			return exitcode.UsageErr(fmt.Errorf("--priority %d: want 0-32767", prio))
		}
		dev, err := ownDevice(cx)
		if err != nil {
			return err
		}
		if !cx.IsSet("priority") {
			prio = dev.Priority
		}
		if prio < 0 {
			prio = settings.DefaultSwapPriority
		}
		if ublk.ActiveSwaps()[dev.Name] {
			fmt.Printf("%s is already swap\n", dev.Name)
			return nil
		}
		if dev.Fresh {
			if out, err := exec.Command("mkswap", dev.Name).CombinedOutput(); err != nil {
				return fmt.Errorf("mkswap %s: %v: %s", dev.Name, err, strings.TrimSpace(string(out)))
			}
		}
		if err := swapon(dev.Name, prio); err != nil {
			return err
		}
		fmt.Printf("%s on as swap (priority %d, fresh %v)\n", dev.Name, prio, dev.Fresh)
		return nil
	},
}

var offCommand = &cli.Command{
	Name:      "off",
	Usage:     "swapoff a device of the daemon's (its pages come back into the processes)",
	UsageText: "s4d swap off [--unless-kept] DEVICE",
	Flags: append([]cli.Flag{&cli.BoolFlag{Name: "unless-kept",
		Usage: "leave swap on if the daemon keeps the device across its stops (persist): s4d-swap@.service's stop, so that a restart of the daemon hands the device and its pages over instead of swapping everything in"}}, flags...),
	Action: func(cx *cli.Context) error {
		dev, err := ownDevice(cx)
		if err != nil {
			return err
		}
		if !ublk.ActiveSwaps()[dev.Name] {
			return nil
		}
		if dev.Kept && cx.Bool("unless-kept") {
			fmt.Printf("%s left on as swap: the daemon keeps it across its restart\n", dev.Name)
			return nil
		}
		return sysPath(unix.SYS_SWAPOFF, dev.Name, 0)
	},
}

// ownDevice is the daemon's description of the one device named.
func ownDevice(cx *cli.Context) (ipc.SwapDevice, error) {
	if cx.NArg() != 1 {
		return ipc.SwapDevice{}, exitcode.UsageErr(fmt.Errorf("want one device, e.g. /dev/ublkb0, got %q", cx.Args().Slice()))
	}
	name := cx.Args().First()
	if !strings.HasPrefix(name, "/dev/") {
		name = "/dev/" + name
	}
	if err := ublk.Available(); err != nil {
		return ipc.SwapDevice{}, err // names the remedy
	}
	devs, err := call(cx, ipc.SwapRequest{Action: ipc.SwapList})
	if err != nil {
		return ipc.SwapDevice{}, err
	}
	for _, d := range devs {
		if d.Name == name {
			return d, nil
		}
	}
	return ipc.SwapDevice{}, fmt.Errorf("%s is not a swap device of this daemon (`s4d ctl swap` lists them)", name)
}

const (
	swapFlagPrefer  = 0x8000 // SWAP_FLAG_PREFER: the priority given
	swapFlagDiscard = 0x10000
)

// swapon turns path on with prio (-1: the kernel's) and discard: freed
// slots are discarded, which frees their pages in the daemon.
func swapon(path string, prio int) error {
	flags := swapFlagDiscard
	if prio >= 0 {
		flags |= swapFlagPrefer | prio&0x7fff
	}
	return sysPath(unix.SYS_SWAPON, path, flags)
}

func sysPath(nr uintptr, path string, flags int) error {
	p, err := unix.BytePtrFromString(path)
	if err != nil {
		return err
	}
	if _, _, e := unix.Syscall(nr, uintptr(unsafe.Pointer(p)), uintptr(flags), 0); e != 0 {
		op := "swapon"
		if nr == unix.SYS_SWAPOFF {
			op = "swapoff"
		}
		if errors.Is(e, unix.EPERM) && os.Geteuid() != 0 {
			return fmt.Errorf("%s %s: %w (run as root)", op, path, e)
		}
		return fmt.Errorf("%s %s: %w", op, path, e)
	}
	return nil
}
