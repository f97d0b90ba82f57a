package settings

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func write(t *testing.T, text string) string {
	p := filepath.Join(t.TempDir(), "s4d.toml")
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestConfigFile(t *testing.T) {
	c, err := Load(write(t, `
mem_limit = "2G"
backend = "cpu"
codec = "zstd"
log_level = "debug"
page_size = 16384
max_batch_pages = 4096
socket_mode = "0600"
idle_timeout = "90s"
`), true, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.MemLimit != 2<<30 || c.Backend != "cpu" || c.Codec != "zstd" || c.LogLevel != slog.LevelDebug ||
		c.PageSize != 16384 || c.SocketMode != 0o600 || c.IdleTimeout != 90*time.Second || c.Socket != Defaults().Socket {
		t.Fatalf("applied %+v", c)
	}
	if keys := RestartOnly(Defaults(), c); strings.Join(keys, ",") != "socket_mode,codec,page_size,max_batch_pages,idle_timeout" {
		t.Fatalf("restart-only keys %v", keys)
	}
}

// Flags and environment variables that were set win over the file.
func TestSetWinsOverFile(t *testing.T) {
	c, err := Load(write(t, "mem_limit = \"2G\"\nbackend = \"cpu\"\n"), true, map[string]string{"mem-limit": "1M", "workers": "3"})
	if err != nil {
		t.Fatal(err)
	}
	if c.MemLimit != 1<<20 || c.Backend != "cpu" || c.Workers != 3 {
		t.Fatalf("got %+v", c)
	}
	if _, err := Load(filepath.Join(t.TempDir(), "none.toml"), false, map[string]string{"page-size": "lots"}); err == nil || !strings.Contains(err.Error(), "--page-size") {
		t.Fatalf("bad flag: %v", err)
	}
}

func TestConfigFileErrors(t *testing.T) {
	if _, err := Load(filepath.Join(t.TempDir(), "missing.toml"), false, nil); err != nil {
		t.Fatalf("missing default file: %v", err)
	}
	if _, err := Load(filepath.Join(t.TempDir(), "missing.toml"), true, nil); err == nil {
		t.Fatal("missing named file accepted")
	}
	if _, err := Load(write(t, "mem_limt = \"1G\"\n"), true, nil); err == nil || !strings.Contains(err.Error(), "unknown setting mem_limt") {
		t.Fatalf("typo: %v", err)
	}
	if _, err := Load(write(t, "mem_limit = \n"), true, nil); err == nil {
		t.Fatal("syntax error accepted")
	}
	_, err := Load(write(t, "mem_limit = \"lots\"\nlog_level = \"loud\"\n"), true, nil)
	if err == nil || !strings.Contains(err.Error(), "mem_limit") || !strings.Contains(err.Error(), "log_level") {
		t.Fatalf("bad values: %v", err)
	}
}

func TestExampleConfigParses(t *testing.T) {
	if _, err := Load("../systemd/s4d.toml", true, nil); err != nil {
		t.Fatal(err)
	}
}

// Every setting's default reads back as itself, and the example file
// names every setting.
func TestTable(t *testing.T) {
	example, err := os.ReadFile("../systemd/s4d.toml")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range Table {
		c := Defaults()
		if err := s.parse(&c, s.Default()); err != nil || s.show(&c) != s.Default() {
			t.Errorf("%s: default %q does not read back: %v", s.Name, s.Default(), err)
		}
		if !strings.Contains(string(example), s.Key()+" =") {
			t.Errorf("%s is not in systemd/s4d.toml", s.Key())
		}
	}
}

func TestValidate(t *testing.T) {
	c := Defaults()
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, ps := range []int{0, 2048, 5000, 131072} {
		c := Defaults()
		c.PageSize = ps
		if c.Validate() == nil {
			t.Errorf("page size %d accepted", ps)
		}
	}
	c.Codec = "gzip"
	if c.Validate() == nil {
		t.Error("codec gzip accepted")
	}
}

func TestMetricsListenSetting(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s4d.toml")
	os.WriteFile(path, []byte("metrics_listen = \"127.0.0.1:9367\"\n"), 0o644)
	c, err := Load(path, true, nil)
	if err != nil || c.MetricsListen != "127.0.0.1:9367" {
		t.Fatalf("%v %q", err, c.MetricsListen)
	}
	if keys := RestartOnly(Defaults(), c); len(keys) != 1 || keys[0] != "metrics_listen" {
		t.Fatalf("a reload should say metrics_listen needs a restart: %v", keys)
	}
}

// swap_io named the Go swap path's switch until the path was removed: the
// default's value still starts (noted for the log), "go" does not.
func TestRemovedSwapIO(t *testing.T) {
	c, err := Load(write(t, "swap_io = \"native\"\n"), true, nil)
	if err != nil || len(c.Deprecated) != 1 || !strings.Contains(c.Deprecated[0], "swap_io") {
		t.Fatalf("swap_io = native: %v, notes %q", err, c.Deprecated)
	}
	for _, v := range []string{"go", "fast"} {
		if _, err := Load(write(t, "swap_io = \""+v+"\"\n"), true, nil); err == nil || !strings.Contains(err.Error(), "swap_io") {
			t.Fatalf("swap_io = %s: %v", v, err)
		}
	}
	if _, err := Load(write(t, "swap_io = \"go\"\n"), true, nil); !strings.Contains(err.Error(), "Go swap path was removed") {
		t.Fatalf("swap_io = go: %v", err)
	}
	t.Setenv("S4D_SWAP_IO", "go")
	if _, err := Load(filepath.Join(t.TempDir(), "none.toml"), false, nil); err == nil || !strings.Contains(err.Error(), "S4D_SWAP_IO") {
		t.Fatalf("S4D_SWAP_IO=go: %v", err)
	}
}
