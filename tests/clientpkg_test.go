package tests

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The client packages of `make deb` (make deb-clients): lintian finds no
// error in them; unpacked, python3-s4d imports and talks to a daemon, and a
// C program builds against libs4d-dev through pkg-config and runs on
// libs4d0.
func TestClientPackages(t *testing.T) {
	for _, tool := range []string{"dpkg-deb", "objdump", "cc", "pkg-config"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not available: %v", tool, err)
		}
	}
	const version = "0.1.0+clients1"
	if out, err := exec.Command("make", "-C", "..", "--no-print-directory", "deb-clients", "VERSION="+version, "DEB_COMPRESS=gzip").CombinedOutput(); err != nil {
		t.Fatalf("make deb-clients: %v\n%s", err, out)
	}
	arch, _ := exec.Command("dpkg", "--print-architecture").Output()
	a := strings.TrimSpace(string(arch))
	bin, _ := filepath.Abs("../bin")
	debs := []string{filepath.Join(bin, "libs4d0_"+version+"_"+a+".deb"), filepath.Join(bin, "libs4d-dev_"+version+"_"+a+".deb"),
		filepath.Join(bin, "python3-s4d_"+version+"_all.deb")}
	if lintian, err := exec.LookPath("lintian"); err == nil {
		out, err := exec.Command(lintian, append([]string{"--fail-on", "error"}, debs...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("lintian: %v\n%s", err, out)
		}
		t.Logf("lintian: no errors\n%s", out)
	}
	root := t.TempDir()
	for _, deb := range debs {
		if out, err := exec.Command("dpkg-deb", "-x", deb, root).CombinedOutput(); err != nil {
			t.Fatalf("dpkg-deb -x %s: %v\n%s", deb, err, out)
		}
	}
	d := start(t)

	py := exec.Command(pythonFor(t), "-c", "import s4d, sys; c = s4d.Client(); c.put('pkg', [1], b'p' * c.page_size); "+
		"assert c.get('pkg', [1]) == b'p' * c.page_size; print(s4d.__file__)")
	py.Env = append(os.Environ(), "S4D_SOCKET="+d.socket, "PYTHONPATH="+filepath.Join(root, "usr/lib/python3/dist-packages"), "PYTHONDONTWRITEBYTECODE=1")
	if out, err := py.CombinedOutput(); err != nil || !strings.HasPrefix(string(out), root) {
		t.Fatalf("python3-s4d: %v\n%s", err, out)
	}

	pcdir, _ := filepath.Glob(filepath.Join(root, "usr/lib/*/pkgconfig"))
	if len(pcdir) != 1 {
		t.Fatalf("no pkgconfig directory in libs4d-dev: %v", pcdir)
	}
	pc := exec.Command("pkg-config", "--cflags", "--libs", "s4d")
	pc.Env = append(os.Environ(), "PKG_CONFIG_PATH="+pcdir[0], "PKG_CONFIG_SYSROOT_DIR="+root)
	flags, err := pc.Output()
	if err != nil {
		t.Fatalf("pkg-config: %v", err)
	}
	prog := filepath.Join(t.TempDir(), "prog")
	const src = `#include <s4d.h>
#include <stdio.h>
#include <string.h>
int main(void) {
	int err; s4d *c = s4d_connect(NULL, &err);
	if (!c) { printf("%s\n", s4d_strerror(err)); return 1; }
	char page[65536]; uint64_t k = 3; memset(page, 'x', sizeof page);
	int rc = s4d_put(c, "pkg-c", &k, 1, page, NULL);
	printf("%s\n", s4d_strerror(rc)); s4d_close(c); return rc;
}`
	args := append([]string{"-x", "c", "-o", prog, "-"}, strings.Fields(string(flags))...)
	cc := exec.Command("cc", args...)
	cc.Stdin = strings.NewReader(src)
	if out, err := cc.CombinedOutput(); err != nil {
		t.Fatalf("cc %v: %v\n%s", args, err, out)
	}
	run := exec.Command(prog)
	run.Env = append(os.Environ(), "S4D_SOCKET="+d.socket, "LD_LIBRARY_PATH="+filepath.Dir(pcdir[0]))
	if out, err := run.CombinedOutput(); err != nil || string(out) != "OK\n" {
		t.Fatalf("program on libs4d0: %v\n%s", err, out)
	}
}
