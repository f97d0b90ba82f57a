package docs

import (
	"regexp"
	"slices"
	"strings"

	"github.com/s4d-project/s4d/backends"
	"github.com/s4d-project/s4d/pagefmt"
)

// The values the scripts complete after a flag, or as a command's
// argument, all taken from definitions: the columns from a command's
// Description (the lines the man pages show as a list), the backends from
// their registry, the codecs from their parser.

// valueSet is what a flag takes: words, or (list) a comma-separated list
// of them (--output, which may also start with + to add to the defaults).
type valueSet struct {
	words []string
	list  bool
}

// columns are the names of a listing's columns: the indented lines of its
// Description, first word each (descMarkdown shows them the same way).
func columns(n *node) []string {
	var out []string
	for _, line := range strings.Split(n.desc, "\n") {
		// A description may list two tables (ctl idle's), sharing names.
		if t := strings.TrimLeft(line, " "); t != line && t != "" && !slices.Contains(out, strings.Fields(t)[0]) {
			out = append(out, strings.Fields(t)[0])
		}
	}
	return out
}

// backendNames are the engines registered, most preferred first.
func backendNames() []string { return backends.Names() }

// codecNames are the codecs ParseCodec knows, found by their numbers.
func codecNames() []string {
	var out []string
	for c := pagefmt.Codec(1); c != 0; c++ {
		if _, err := pagefmt.ParseCodec(c.String()); err != nil {
			break
		}
		out = append(out, c.String())
	}
	return out
}

// mentioned are the words of extra that usage names: the keywords a flag
// takes beside the names (auto, all, both, default), as its help says.
func mentioned(usage string, extra ...string) []string {
	var out []string
	for _, w := range extra {
		if regexp.MustCompile(`\b` + w + `\b`).MatchString(usage) {
			out = append(out, w)
		}
	}
	return out
}

// values is what f of n completes to; none: a file name.
func values(n *node, f flagDoc) valueSet {
	if !f.value {
		return valueSet{}
	}
	switch f.names[0] {
	case "output":
		return valueSet{words: columns(n), list: true}
	case "backend":
		return valueSet{words: append(backendNames(), mentioned(f.usage, "auto", "all")...)}
	case "codec":
		return valueSet{words: append(codecNames(), mentioned(f.usage, "both", "default")...)}
	}
	// The daemon's true/false settings are string flags (so that --persist
	// true reads as in the README): their default says which they are.
	if d := strings.Trim(f.def, `"`); d == "true" || d == "false" {
		return valueSet{words: []string{"true", "false"}}
	}
	return valueSet{}
}

// alternation is a usage text's last word when it is a choice of plain
// words: "s4d ctl codec --pool P lz4|zstd|default".
var alternation = regexp.MustCompile(`^[a-z0-9-]+(\|[a-z0-9-]+)+$`)

// arguments are the words n takes as its argument, from its usage text.
func arguments(n *node) []string {
	f := strings.Fields(n.text)
	if len(f) < 2 || !alternation.MatchString(f[len(f)-1]) {
		return nil
	}
	return strings.Split(f[len(f)-1], "|")
}
