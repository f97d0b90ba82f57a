// Package buildinfo says which s4d this is: version, commit and build date.
//
// `make build` sets the three variables with -ldflags -X (from git and the
// daemon's version constant); a plain `go build` or `go install` leaves them
// empty, and what the Go toolchain recorded in the binary fills the gaps (the
// commit and its time, for a build inside a git checkout), then the daemon's
// version constant: every binary can say where it came from.
package buildinfo

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/s4d-project/s4d/daemon"
)

// Set with -ldflags "-X github.com/s4d-project/s4d/cmd/s4d/buildinfo.version=...".
var (
	version string
	commit  string
	date    string
)

// Info is what a binary knows about its own build.
type Info struct {
	Version   string `json:"version"`
	Commit    string `json:"commit"`
	Date      string `json:"date"`
	GoVersion string `json:"go_version"`
	Modified  bool   `json:"modified,omitempty"` // built from a tree with uncommitted changes
}

// Get returns the build's information; fields nobody recorded read "unknown".
func Get() Info {
	in := Info{Version: version, Commit: commit, Date: date, GoVersion: runtime.Version()}
	if bi, ok := debug.ReadBuildInfo(); ok {
		// A module version exists for `go install ...@vX`; "(devel)" otherwise.
		if in.Version == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			in.Version = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				if in.Commit == "" {
					in.Commit = s.Value[:min(len(s.Value), 12)]
				}
			case "vcs.time":
				if in.Date == "" {
					in.Date = s.Value
				}
			case "vcs.modified":
				in.Modified = s.Value == "true"
			}
		}
	}
	if in.Version == "" {
		// The constant `make build` reads too (Makefile, VERSION).
		in.Version = strings.TrimPrefix(daemon.Version, "s4d ")
	}
	for _, f := range []*string{&in.Version, &in.Commit, &in.Date} {
		if *f == "" {
			*f = "unknown"
		}
	}
	return in
}

// String is the one line `s4d --version` prints.
func (in Info) String() string {
	dirty := ""
	if in.Modified {
		dirty = ", modified"
	}
	return fmt.Sprintf("s4d version %s (commit %s%s, built %s, %s)", in.Version, in.Commit, dirty, in.Date, in.GoVersion)
}
