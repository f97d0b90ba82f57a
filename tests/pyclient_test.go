package tests

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// pythonFor returns a Python 3 interpreter for the client tests: the
// system's first, which other users may run too (the tests run clients as
// other users when root).
func pythonFor(t *testing.T) string {
	t.Helper()
	if _, err := os.Stat("/usr/bin/python3"); err == nil {
		return "/usr/bin/python3"
	}
	p, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3")
	}
	return p
}

// The Python client (clients/python) against the real daemon: its unittest
// suite, which also starts, stops and kills daemons of its own (S4D_BIN)
// and, as root, runs clients as two other users.
func TestPythonClient(t *testing.T) {
	py := pythonFor(t)
	d := start(t, "--socket-mode", "0666")
	src, err := filepath.Abs("../clients/python")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(py, "-m", "unittest", "discover", "-v", "-s", filepath.Join(src, "tests"), "-t", filepath.Join(src, "tests"))
	cmd.Env = append(os.Environ(), "S4D_SOCKET="+d.socket, "S4D_BIN="+s4dBin, "PYTHONPATH="+src, "PYTHONDONTWRITEBYTECODE=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("python client tests: %v\n%s", err, out)
	}
	t.Logf("%s", out)
}
