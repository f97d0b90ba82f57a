package main

import (
	"slices"
	"testing"
)

// A boolean setting of the daemon stands alone or takes a value; nothing
// else is touched (issue 26: `--persist` alone was refused).
func TestBoolsAlone(t *testing.T) {
	for _, c := range []struct{ in, want []string }{
		{[]string{"s4d", "daemon", "--persist"}, []string{"s4d", "daemon", "--persist=true"}},
		{[]string{"s4d", "daemon", "--persist", "--backing-file", "f"}, []string{"s4d", "daemon", "--persist=true", "--backing-file", "f"}},
		{[]string{"s4d", "daemon", "--persist", "true", "--webgpu-cpu"}, []string{"s4d", "daemon", "--persist", "true", "--webgpu-cpu=true"}},
		{[]string{"s4d", "daemon", "-persist", "false"}, []string{"s4d", "daemon", "-persist", "false"}},
		{[]string{"s4d", "daemon", "--persist=false"}, []string{"s4d", "daemon", "--persist=false"}},
		// A value that looks like a flag stays the value of its flag.
		{[]string{"s4d", "daemon", "--socket", "--persist"}, []string{"s4d", "daemon", "--socket", "--persist"}},
		{[]string{"s4d", "daemon", "--help"}, []string{"s4d", "daemon", "--help"}},
		// Only the daemon's settings: ctl's flags are left to ctl.
		{[]string{"s4d", "ctl", "--persist"}, []string{"s4d", "ctl", "--persist"}},
		{[]string{"s4d", "--version"}, []string{"s4d", "--version"}},
	} {
		if got := boolsAlone(c.in); !slices.Equal(got, c.want) {
			t.Errorf("boolsAlone(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}
