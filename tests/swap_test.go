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
