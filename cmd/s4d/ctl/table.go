package ctl

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/urfave/cli/v2"

	"github.com/s4d-project/s4d/cmd/s4d/exitcode"
)

// A listing is printed the way zramctl prints one: chosen columns
// (--output), with or without headings, aligned or raw, sizes for people or
// in bytes, or as JSON. Every listing command shares these flags.

// kind says how a column's values are printed.
type kind int

const (
	text  kind = iota // as is
	count             // an integer, right-aligned in spirit
	size              // bytes: 1.5M for people, 1572864 with --bytes
	float             // a ratio or a rate with two decimals
)

// column is one named column of rows of type T.
type column[T any] struct {
	name string
	help string
	kind kind
	get  func(T) any // string, uint64 or float64; nil or "" prints as "-"
}

// table is a listing's columns and the ones shown unless --output says.
type table[T any] struct {
	name     string // the JSON array's key
	columns  []column[T]
	defaults []string
	// aliases are old column names --output still takes (upper case):
	// a renamed column keeps working in scripts, unlisted.
	aliases map[string]string
}

// listFlags are the output flags of every listing command.
func listFlags(what string, outputHelp string) []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Usage: "columns to print, comma-separated; +COLS adds to the default ones. " + outputHelp},
		&cli.BoolFlag{Name: "noheadings", Aliases: []string{"n"}, Usage: "do not print headings"},
		&cli.BoolFlag{Name: "raw", Usage: "separate columns by one space, no alignment (for scripts)"},
		&cli.BoolFlag{Name: "bytes", Aliases: []string{"b"}, Usage: "print sizes in bytes rather than K, M, G"},
		&cli.BoolFlag{Name: "json", Usage: "print " + what + " as JSON"},
	}
}

// listOpts is what the flags asked for.
type listOpts struct {
	output     string
	noheadings bool
	raw        bool
	bytes      bool
	json       bool
	// stream: rows printed one at a time (watch): JSON one object per
	// line, columns padded to fixed widths so lines printed apart align.
	stream bool
}

func optsOf(cx *cli.Context) listOpts {
	return listOpts{output: cx.String("output"), noheadings: cx.Bool("noheadings"), raw: cx.Bool("raw"),
		bytes: cx.Bool("bytes"), json: cx.Bool("json")}
}

// help lists the columns, for --output's usage text and for errors.
func (t *table[T]) help() string {
	var b strings.Builder
	for _, c := range t.columns {
		fmt.Fprintf(&b, "\n  %-16s %s", c.name, c.help)
	}
	return b.String()
}

func (t *table[T]) names() string {
	var n []string
	for _, c := range t.columns {
		n = append(n, c.name)
	}
	return strings.Join(n, ", ")
}

// pick resolves --output into columns; an unknown name is a usage error
// that lists the valid ones.
func (t *table[T]) pick(output string) ([]column[T], error) {
	names := t.defaults
	if output != "" {
		list := output
		if rest, ok := strings.CutPrefix(output, "+"); ok {
			list = strings.Join(t.defaults, ",") + "," + rest
		}
		names = nil
		for _, n := range strings.Split(list, ",") {
			if n = strings.TrimSpace(n); n != "" {
				names = append(names, strings.ToUpper(n))
			}
		}
		if len(names) == 0 {
			return nil, exitcode.UsageErr(fmt.Errorf("--output %q names no column; available columns:%s", output, t.help()))
		}
	}
	var out []column[T]
	for _, n := range names {
		if a, ok := t.aliases[n]; ok {
			n = a
		}
		found := false
		for _, c := range t.columns {
			if c.name == n {
				out, found = append(out, c), true
				break
			}
		}
		if !found {
			return nil, exitcode.UsageErr(fmt.Errorf("unknown column %q; available columns:%s", n, t.help()))
		}
	}
	return out, nil
}

// cell formats one value for a terminal or a script.
func cell(k kind, v any, o listOpts) string {
	switch x := v.(type) {
	case nil:
		return "-"
	case string:
		if x == "" {
			return "-"
		}
		if o.raw {
			// One field per column, whatever the text holds.
			return strings.NewReplacer(" ", `\x20`, "\t", `\x09`, "\n", `\x0a`).Replace(x)
		}
		return x
	case uint64:
		if k == size && !o.bytes {
			return human(x)
		}
		return strconv.FormatUint(x, 10)
	case float64:
		if math.IsInf(x, 0) {
			return "inf"
		}
		return strconv.FormatFloat(x, 'f', 2, 64)
	}
	return fmt.Sprint(v)
}

// jsonValue keeps numbers numbers; sizes stay bytes unless asked otherwise,
// so a script never parses "1.5M".
func jsonValue(v any) any {
	switch x := v.(type) {
	case nil:
		return nil
	case string:
		if x == "" {
			return nil
		}
	case float64:
		if math.IsInf(x, 0) || math.IsNaN(x) {
			return nil
		}
		return math.Round(x*100) / 100
	}
	return v
}

// object is a JSON object whose keys keep the order of the columns asked
// for, as a map would not.
type object []field

type field struct {
	key string
	val any
}

func (o object) MarshalJSON() ([]byte, error) {
	b := []byte{'{'}
	for i, f := range o {
		if i > 0 {
			b = append(b, ',')
		}
		k, _ := json.Marshal(f.key)
		v, err := json.Marshal(f.val)
		if err != nil {
			return nil, err
		}
		b = append(append(append(b, k...), ':'), v...)
	}
	return append(b, '}'), nil
}

// print writes rows as --output, --noheadings, --raw, --bytes and --json say.
func (t *table[T]) print(w io.Writer, rows []T, o listOpts) error {
	cols, err := t.pick(o.output)
	if err != nil {
		return err
	}
	if o.json {
		objs := make([]object, 0, len(rows))
		for _, r := range rows {
			m := make(object, len(cols))
			for i, c := range cols {
				m[i] = field{strings.ToLower(c.name), jsonValue(c.get(r))}
			}
			objs = append(objs, m)
		}
		enc := json.NewEncoder(w)
		if o.stream {
			for _, obj := range objs {
				if err := enc.Encode(obj); err != nil {
					return err
				}
			}
			return nil
		}
		enc.SetIndent("", "  ")
		return enc.Encode(map[string]any{t.name: objs})
	}
	sep, out := "\t", w
	var tw *tabwriter.Writer
	if o.raw {
		sep = " "
	} else if o.stream {
		sep = "  "
	} else {
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		out = tw
	}
	line := make([]string, len(cols))
	pad := func(i int, v string) string {
		if o.stream && !o.raw && i < len(cols)-1 {
			return fmt.Sprintf("%-*s", max(len(cols[i].name), 8), v)
		}
		return v
	}
	if !o.noheadings {
		for i, c := range cols {
			line[i] = pad(i, c.name)
		}
		fmt.Fprintln(out, strings.Join(line, sep))
	}
	for _, r := range rows {
		for i, c := range cols {
			line[i] = pad(i, cell(c.kind, c.get(r), o))
		}
		fmt.Fprintln(out, strings.Join(line, sep))
	}
	if tw != nil {
		return tw.Flush()
	}
	return nil
}

// ratioOf is DATA/COMPR: nil when nothing is stored, +Inf when everything
// stored takes no bytes (zero and same-filled pages).
func ratioOf(orig, compr uint64) any {
	if compr == 0 {
		if orig == 0 {
			return nil
		}
		return math.Inf(1)
	}
	return float64(orig) / float64(compr)
}
