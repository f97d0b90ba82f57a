package metrics

import (
	"strings"
	"testing"
)

func TestCheckAddress(t *testing.T) {
	for addr, want := range map[string]string{
		"127.0.0.1:9367":     "tcp 127.0.0.1:9367",
		"127.0.0.2:1":        "tcp 127.0.0.2:1",
		"[::1]:9367":         "tcp [::1]:9367",
		"localhost:0":        "tcp localhost:0",
		"/run/s4d/metrics":   "unix /run/s4d/metrics",
		"unix:/tmp/m.sock":   "unix /tmp/m.sock",
		"0.0.0.0:9367":       "",
		":9367":              "",
		"[::]:9367":          "",
		"10.1.2.3:9367":      "",
		"example.com:9367":   "",
		"127.0.0.1":          "",
		"127.0.0.1:notaport": "",
		"relative.sock":      "",
		"unix:relative.sock": "",
	} {
		network, address, err := CheckAddress(addr)
		got := network + " " + address
		if err != nil {
			got = ""
			if !strings.Contains(err.Error(), "no authentication") && !strings.Contains(err.Error(), "absolute") {
				t.Errorf("%q: unclear error %v", addr, err)
			}
		}
		if got != want {
			t.Errorf("CheckAddress(%q) = %q (%v), want %q", addr, got, err, want)
		}
	}
}
