package buildinfo

import (
	"strings"
	"testing"
)

func TestLinkerValuesWin(t *testing.T) {
	defer func(v, c, d string) { version, commit, date = v, c, d }(version, commit, date)
	version, commit, date = "1.2.3", "0123456789ab+dirty", "2026-11-25T00:00:00Z"
	in := Get()
	if in.Version != "1.2.3" || in.Commit != "0123456789ab+dirty" || in.Date != "2026-11-25T00:00:00Z" {
		t.Fatalf("%+v", in)
	}
	if s := in.String(); !strings.HasPrefix(s, "s4d version 1.2.3 (commit 0123456789ab+dirty") || !strings.Contains(s, "go1.") {
		t.Fatalf("%q", s)
	}
}

func TestNothingRecorded(t *testing.T) {
	// A test binary has no version or (with -buildvcs=false) commit: the
	// line still reads well.
	if in := Get(); in.Version == "" || in.Commit == "" || in.Date == "" {
		t.Fatalf("empty fields: %+v", in)
	}
}

// Built without make (go build, go run), the version is the daemon's
// constant, not "unknown".
func TestVersionWithoutLinkerValues(t *testing.T) {
	defer func(v string) { version = v }(version)
	version = ""
	if in := Get(); in.Version == "unknown" || in.Version == "" || strings.HasPrefix(in.Version, "s4d") {
		t.Fatalf("version %q", in.Version)
	}
}
