package tests

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// On a kernel without ublk (this machine's), `s4d swap add` fails with the
// reason and the remedy, the daemon goes on serving, and `s4d ctl swap`
// lists nothing; a [[swap]] table in the configuration is logged, not
// fatal.
func TestSwapWithoutUblk(t *testing.T) {
	if _, err := os.Stat("/dev/ublk-control"); err == nil {
		t.Skip("this kernel has ublk: the guest scenarios cover it")
	}
	conf := filepath.Join(t.TempDir(), "s4d.toml")
	if err := os.WriteFile(conf, []byte("[[swap]]\nsize = \"64M\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	d := start(t, "--config", conf)
	out, err := exec.Command(s4dBin, "swap", "add", "--size", "64M", "--socket", d.socket).CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Fatalf("swap add: %v, want exit 1\n%s", err, out)
	}
	for _, want := range []string{"ublk is not available", "modprobe ublk_drv", "CONFIG_BLK_DEV_UBLK"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("swap add says %q, without %q", out, want)
		}
	}
	if got := d.mustCtl("swap"); strings.TrimSpace(got) != "" {
		t.Errorf("ctl swap lists %q, want nothing", got)
	}
	if !strings.Contains(d.log.String(), "swap device from the configuration not created") {
		t.Errorf("the [[swap]] table's failure is not logged:\n%s", d.log.String())
	}
	// Bad input is a usage error before the daemon is asked.
	out, err = exec.Command(s4dBin, "swap", "add", "--size", "12", "--socket", d.socket).CombinedOutput()
	if !errors.As(err, &ee) || ee.ExitCode() != 2 {
		t.Fatalf("swap add --size 12: %v, want exit 2\n%s", err, out)
	}
	if _, err := d.client().Hello(ctx(t)); err != nil {
		t.Fatal(err)
	}
}

// Under a real systemd (tests/systemd/boot.sh), on this machine's kernel
// without ublk: the daemon with the swap drop-in (systemd/s4d-swap.conf)
// starts and serves, and the swap unit s4d-swap@.service, started by hand
// for a device, fails saying why and naming the remedy; the unit files
// pass systemd-analyze verify.
func TestSwapUnitUnderSystemd(t *testing.T) {
	if _, err := os.Stat("/dev/ublk-control"); err == nil {
		t.Skip("this kernel has ublk: the unit would make a real device swap")
	}
	g := bootGuestWith(t, func(t *testing.T, inject string) {
		installFromCheckout(t, inject)
		dropin := filepath.Join(inject, "etc/systemd/system/s4d.service.d")
		units := filepath.Join(inject, "usr/local/lib/systemd/system")
		for src, dst := range map[string]string{
			"../systemd/s4d-swap.conf":     filepath.Join(dropin, "swap.conf"),
			"../systemd/s4d-swap@.service": filepath.Join(units, "s4d-swap@.service"),
		} {
			b, err := os.ReadFile(src)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(dst, b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	})
	g.must("systemd-sysusers")
	g.must("systemctl", "daemon-reload")
	unit := "/usr/local/lib/systemd/system/"
	if out, err := g.run("systemd-analyze", "verify", unit+"s4d.service", unit+"s4d-swap@ublkb0.service"); err != nil {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
	}
	g.must("systemctl", "start", "s4d.socket", "s4d.service")
	g.must("s4d", "ctl", "swap") // root, through the unit's socket: no devices
	if st := g.show("ActiveState", "User"); st["ActiveState"] != "active" || st["User"] != "root" {
		t.Fatalf("s4d with the swap drop-in: %v", st)
	}
	if out, err := g.run("systemctl", "start", "s4d-swap@ublkb0.service"); err == nil {
		t.Fatalf("s4d-swap@ublkb0 started on a kernel without ublk:\n%s", out)
	}
	st := g.must("systemctl", "show", "s4d-swap@ublkb0", "-p", "ActiveState,Result")
	if !strings.Contains(st, "ActiveState=failed") || !strings.Contains(st, "Result=exit-code") {
		t.Fatalf("s4d-swap@ublkb0 after a failed start: %s", st)
	}
	out := g.must("journalctl", "-u", "s4d-swap@ublkb0", "--no-pager")
	for _, want := range []string{"ublk is not available", "modprobe ublk_drv"} {
		if !strings.Contains(out, want) {
			t.Errorf("s4d-swap@ublkb0's journal without ublk lacks %q:\n%s", want, out)
		}
	}
}
