package docs

import (
	"fmt"
	"strings"

	"github.com/cpuguy83/go-md2man/v2/md2man"

	"github.com/s4d-project/s4d/settings"
)

// configExample is the EXAMPLE section's file; every key in it must be a
// setting or a [[swap]] key, and the whole must load (the tests check).
const configExample = `mem_limit = "8G"
codec = "zstd"
backing_file = "/var/lib/s4d/backing"
persist = true
metrics_listen = "127.0.0.1:9367"
log_level = "info"

[[swap]]
size = "25%"
max_size = "4G"
priority = 100`

// configPage is s4d.toml(5): the configuration file, one entry per
// setting of settings.Table, the table the daemon's flags come from too.
func configPage() []byte {
	var b strings.Builder
	b.WriteString("# S4D.TOML 5 \"\" \"s4d\" \"s4d manual\"\n\n")
	b.WriteString("# NAME\n\ns4d.toml - configuration file of the s4d daemon\n\n")
	fmt.Fprintf(&b, "# SYNOPSIS\n\n*%s*\n\n", settings.DefaultFile)
	b.WriteString(`# DESCRIPTION

**s4d daemon** reads this file at start (another with **--config** or *$S4D\_CONFIG*; a file named
so must exist, the default one may be missing). It is TOML: one *key* = *value* a line, the keys
below, a value a string, a whole number or true/false (any may be given as a string: "64M",
"30s"). Each key is the daemon option of the same name with underscores for dashes; an option or
environment variable that is set wins over the file. An unknown key or a malformed value is an
error naming it: the daemon does not start.

**SIGHUP** (**systemctl reload s4d**) reads the file again. The keys *changed by a reload* take
effect at once: ` + reloadKeys(func(k string) string { return "**" + esc(k) + "**" }) + `; a change to any other is logged as needing a restart. A file
with an error is logged and the running configuration stays.

Sizes are bytes, with an optional K, M, G or T suffix (powers of 1024). Durations are Go
durations: 500ms, 30s, 10m, 1h30m.

# KEYS

`)
	for _, s := range settings.Table {
		if s.Hidden {
			continue
		}
		def := s.Default()
		if def == "" {
			def = "none"
		}
		// The default as the daemon prints it, not as TOML: 0660 or a
		// path would need quotes there.
		notes := []string{"default: " + esc(def)}
		if s.Reload {
			notes = append(notes, "changed by a *reload*")
		}
		notes = append(notes, "option **--"+esc(s.Name)+"**")
		if s.Env != "" {
			notes = append(notes, "environment *"+esc(s.Env)+"*")
		}
		fmt.Fprintf(&b, "**%s**\n:   %s.\n    %s.\n\n", esc(s.Key()), esc(s.Usage), capitalize(strings.Join(notes, "; ")))
	}
	b.WriteString(`# TABLES

## [[swap]]

A swap device the daemon creates when it starts, one table each (any number): a block device served
through the kernel's ublk driver, made swap by **s4d swap on** (which *s4d-swap@.service* runs for
each device). The daemon then needs root, and the module ublk\_drv loaded. A table is checked at
start like any key; a reload does not change the devices. Its keys:

`)
	for _, k := range settings.SwapKeys {
		fmt.Fprintf(&b, "**%s**\n:   %s", esc(k.Key), esc(k.Usage))
		if k.Default != "" {
			fmt.Fprintf(&b, ".\n    Default: %s", esc(k.Default))
		}
		b.WriteString(".\n\n")
	}
	b.WriteString("# EXAMPLE\n\n```\n" + configExample + "\n```\n\n")
	fmt.Fprintf(&b, "# FILES\n\n*%s*\n:   the file; **make install** and the Debian package put a commented one there, "+
		"also in *share/doc/s4d* under the installation prefix\n\n", settings.DefaultFile)
	b.WriteString("*/var/lib/s4d*\n:   the service's state directory (mode 0700, owned by user s4d): the place for a backing file\n\n")
	b.WriteString("# SEE ALSO\n\n**s4d-daemon**(8), **s4d-swap**(8), **s4d**(1), **systemctl**(1)\n")
	return md2man.Render([]byte(b.String()))
}

func capitalize(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// reloadKeys lists the keys a reload changes, from the settings table's
// Reload field (so no page or example can list other ones), each through
// format.
func reloadKeys(format func(string) string) string {
	var keys []string
	for _, s := range settings.Table {
		if s.Reload && !s.Hidden {
			keys = append(keys, format(s.Key()))
		}
	}
	return strings.Join(keys, ", ")
}
