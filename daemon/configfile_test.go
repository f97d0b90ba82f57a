package daemon

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
	f, err := LoadFile(write(t, `
mem_limit = "2G"
backend = "cpu"
codec = "zstd"
log_level = "debug"
page_size = 16384
socket_mode = "0600"
idle_timeout = "90s"
`), true)
	if err != nil {
		t.Fatal(err)
	}
	c := Defaults()
	if err := f.Apply(&c); err != nil {
		t.Fatal(err)
	}
	if c.MemLimit != 2<<30 || c.Backend != "cpu" || c.Codec != "zstd" || c.LogLevel != slog.LevelDebug ||
		c.PageSize != 16384 || c.SocketMode != 0o600 || c.IdleTimeout != 90*time.Second || c.Socket != Defaults().Socket {
		t.Fatalf("applied %+v", c)
	}
	if keys := restartOnly(Defaults(), c); strings.Join(keys, ",") != "socket_mode,codec,page_size,idle_timeout" {
		t.Fatalf("restart-only keys %v", keys)
	}
}

func TestConfigFileErrors(t *testing.T) {
	if _, err := LoadFile(filepath.Join(t.TempDir(), "missing.toml"), false); err != nil {
		t.Fatalf("missing default file: %v", err)
	}
	if _, err := LoadFile(filepath.Join(t.TempDir(), "missing.toml"), true); err == nil {
		t.Fatal("missing named file accepted")
	}
	if _, err := LoadFile(write(t, "mem_limt = \"1G\"\n"), true); err == nil || !strings.Contains(err.Error(), "unknown setting mem_limt") {
		t.Fatalf("typo: %v", err)
	}
	if _, err := LoadFile(write(t, "mem_limit = \n"), true); err == nil {
		t.Fatal("syntax error accepted")
	}
	f, err := LoadFile(write(t, "mem_limit = \"lots\"\nlog_level = \"loud\"\n"), true)
	if err != nil {
		t.Fatal(err)
	}
	c := Defaults()
	err = f.Apply(&c)
	if err == nil || !strings.Contains(err.Error(), "mem_limit") || !strings.Contains(err.Error(), "log_level") {
		t.Fatalf("bad values: %v", err)
	}
}

func TestExampleConfigParses(t *testing.T) {
	f, err := LoadFile("../systemd/s4d.toml", true)
	if err != nil {
		t.Fatal(err)
	}
	c := Defaults()
	if err := f.Apply(&c); err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
}
