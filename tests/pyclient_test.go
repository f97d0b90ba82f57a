package tests

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
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

// The Python client (clients/python) against the real daemon, as users
// install it: its sdist and wheel built offline through the PEP 517 hooks
// (as make does), the wheel installed into a fresh virtual environment,
// and the package's unittest suite run there, importing s4d from the
// environment, not the source tree. The suite also starts, stops and
// kills daemons of its own (S4D_BIN) and, as root, runs clients as two
// other users.
func TestPythonClient(t *testing.T) {
	py := pythonFor(t)
	d := start(t, "--socket-mode", "0666")
	src, err := filepath.Abs("../clients/python")
	if err != nil {
		t.Fatal(err)
	}
	// Not t.TempDir: its parent is closed to the other users the suite runs.
	dir, err := os.MkdirTemp("", "s4d-pywheel-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o755)
	dist := filepath.Join(dir, "dist")
	run := func(name string, args ...string) string {
		t.Helper()
		out, err := exec.Command(name, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	run(py, filepath.Join(src, "tools", "build_dist.py"), dist)
	wheels, _ := filepath.Glob(filepath.Join(dist, "s4d-*-py3-none-any.whl"))
	sdists, _ := filepath.Glob(filepath.Join(dist, "s4d-*.tar.gz"))
	if len(wheels) != 1 || len(sdists) != 1 {
		t.Fatalf("want one wheel and one sdist, got %v %v", wheels, sdists)
	}
	listing := run("tar", "tzf", sdists[0])
	for _, f := range []string{"/LICENSE", "/pyproject.toml", "/PKG-INFO", "/s4d/client.py", "/s4d/_keys.py"} {
		if !strings.Contains(listing, f+"\n") {
			t.Errorf("the sdist has no %s:\n%s", f, listing)
		}
	}
	meta := run("unzip", "-p", wheels[0], "*.dist-info/METADATA")
	for _, want := range []string{"License: Apache-2.0", "Classifier: License :: OSI Approved :: Apache Software License"} {
		if !strings.Contains(meta, want) {
			t.Errorf("the wheel's METADATA lacks %q:\n%s", want, meta)
		}
	}
	// NumPy, an optional dependency, from the system; s4d from the wheel.
	venv := filepath.Join(dir, "venv")
	run(py, "-m", "venv", "--system-site-packages", venv)
	vpy := filepath.Join(venv, "bin", "python3")
	run(vpy, "-m", "pip", "install", "--quiet", "--no-index", "--no-deps", wheels[0])
	where := strings.TrimSpace(run(vpy, "-c", "import s4d; print(s4d.__file__)"))
	if !strings.HasPrefix(where, venv) {
		t.Fatalf("s4d imported from %s, not the environment", where)
	}
	cmd := exec.Command(vpy, "-m", "unittest", "discover", "-v", "-s", filepath.Join(src, "tests"), "-t", filepath.Join(src, "tests"))
	cmd.Dir = dir
	cmd.Env = append(withoutEnv(os.Environ(), "PYTHONPATH"), "S4D_SOCKET="+d.socket, "S4D_BIN="+s4dBin, "PYTHONDONTWRITEBYTECODE=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("python client tests: %v\n%s", err, out)
	}
	t.Logf("%s", out)
}

// The API reference (docs/reference/python.md) is what the docstrings say.
func TestPythonReferenceCurrent(t *testing.T) {
	py := pythonFor(t)
	want, err := exec.Command(py, "../clients/python/tools/apidoc.py").Output()
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("../docs/reference/python.md")
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Error("docs/reference/python.md is out of date: run make docs-python")
	}
}

func withoutEnv(env []string, name string) []string {
	var out []string
	for _, e := range env {
		if !strings.HasPrefix(e, name+"=") {
			out = append(out, e)
		}
	}
	return out
}
