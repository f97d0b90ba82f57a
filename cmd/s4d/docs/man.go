package docs

import (
	"fmt"
	"strings"

	"github.com/cpuguy83/go-md2man/v2/md2man"
)

// exitStatus is the table of exitcode's package comment, for every page.
const exitStatus = `**0**
:   success

**1**
:   any other failure: a page failed, the memory limit, a fault in the daemon

**2**
:   usage: an unknown command, flag or column, or a malformed value

**3**
:   not found: no such pool or key

**4**
:   permission denied: another user's pool, or the socket's permissions (join group s4d)

**5**
:   the daemon is not reachable, or the connection to it was lost
`

// files and environment the daemon and ctl pages name.
const files = `*/etc/s4d/s4d.toml*
:   the daemon's configuration, described in **s4d.toml**(5) (an example is in *share/doc/s4d* under the installation prefix)

*/run/s4d/s4d.sock*
:   the socket clients connect to, made by *s4d.socket* under systemd
`

// esc keeps text literal in markdown: flags' usage strings hold * and _.
func esc(s string) string {
	return strings.NewReplacer(`\`, `\\`, "*", `\*`, "_", `\_`, "`", "\\`", "<", `\<`, "[", `\[`).Replace(s)
}

func flagLine(f flagDoc) string {
	var names []string
	for _, n := range f.names {
		dash := "--"
		if len(n) == 1 {
			dash = "-"
		}
		names = append(names, "**"+dash+esc(n)+"**")
	}
	s := strings.Join(names, ", ")
	if f.value {
		meta := f.meta
		if meta == "" {
			meta = "value"
		}
		s += " *" + esc(meta) + "*"
	}
	return s
}

// manPage renders n's page: markdown built here, roff by go-md2man.
func manPage(root, n *node) []byte {
	var b strings.Builder
	// go-md2man makes the first level-1 heading the .TH line.
	fmt.Fprintf(&b, "# %s %d \"\" \"s4d\" \"s4d manual\"\n\n", strings.ToUpper(n.page()), n.section())
	fmt.Fprintf(&b, "# NAME\n\n%s - %s\n\n", n.page(), esc(n.usage))
	b.WriteString("# SYNOPSIS\n\n")
	switch {
	case n.text != "":
		fmt.Fprintf(&b, "%s\n\n", esc(n.text))
	case len(n.subs) > 0:
		fmt.Fprintf(&b, "**%s** [*options*] *command* [*command options*]\n\n", n.name())
	default:
		fmt.Fprintf(&b, "**%s** [*options*]\n\n", n.name())
	}
	if n.desc != "" {
		b.WriteString("# DESCRIPTION\n\n")
		// Lines of a description that start with spaces are lists of
		// columns: keep them as they are.
		b.WriteString(descMarkdown(n.desc))
	}
	if len(n.subs) > 0 {
		b.WriteString("# COMMANDS\n\n")
		for _, s := range n.subs {
			fmt.Fprintf(&b, "**%s**\n:   %s; see %s\n\n", s.path[len(s.path)-1], esc(s.usage), s.ref())
		}
	}
	if len(n.flags) > 0 {
		b.WriteString("# OPTIONS\n\n")
		for _, f := range n.flags {
			fmt.Fprintf(&b, "%s\n:   %s", flagLine(f), esc(f.usage))
			if f.def != "" {
				fmt.Fprintf(&b, " (default: %s)", esc(f.def))
			}
			if len(f.env) > 0 {
				fmt.Fprintf(&b, " [environment: %s]", esc(strings.Join(f.env, ", ")))
			}
			b.WriteString("\n\n")
		}
	}
	if len(n.path) > 1 && (n.path[1] == "daemon" || n.path[1] == "ctl") || len(n.path) == 1 {
		b.WriteString("# FILES\n\n" + files + "\n")
	}
	if ex := examples[n.page()]; ex != "" {
		b.WriteString("# EXAMPLES\n\n" + ex + "\n")
	}
	b.WriteString("# EXIT STATUS\n\n" + exitStatus + "\n")
	b.WriteString("# SEE ALSO\n\n")
	var see []string
	if len(n.path) > 1 {
		parent := &node{path: n.path[:len(n.path)-1]}
		see = append(see, parent.ref())
	}
	for _, s := range n.subs {
		see = append(see, s.ref())
	}
	if len(n.path) == 1 || n.path[1] == "daemon" {
		see = append(see, "**s4d.toml**(5)")
	}
	see = append(see, "**zramctl**(8)", "**systemctl**(1)")
	if n.section() == 8 && len(n.path) > 1 && n.path[1] == "swap" {
		see = append(see, "**swapon**(8)", "**mkswap**(8)")
	}
	b.WriteString(strings.Join(see, ", ") + "\n\nThe README, *docs/* and PROTOCOL.md in *share/doc/s4d* under the installation prefix (*/usr* or */usr/local*).\n")
	return md2man.Render([]byte(b.String()))
}

// descMarkdown turns a command's Description into paragraphs, with its
// indented lines (columns and their meaning) as a definition list.
func descMarkdown(desc string) string {
	var b strings.Builder
	for _, line := range strings.Split(desc, "\n") {
		if t := strings.TrimLeft(line, " "); t != line && t != "" {
			name, what, _ := strings.Cut(t, " ")
			fmt.Fprintf(&b, "\n**%s**\n:   %s\n", esc(name), esc(strings.TrimSpace(what)))
			continue
		}
		b.WriteString(esc(line) + "\n")
	}
	return b.String() + "\n"
}

// examples are the EXAMPLES sections of the pages an administrator reads
// first; each line of a block is a command as typed.
var examples = map[string]string{
	"s4d-daemon": "Run in the foreground with a memory limit and a backing file for cold pages:\n\n" +
		"```\ns4d daemon --socket /run/s4d/s4d.sock --mem-limit 4G --backing-file /var/lib/s4d/backing\n```\n\n" +
		"Under systemd, set the same in */etc/s4d/s4d.toml* and apply what a reload changes:\n\n" +
		"```\nsystemctl reload s4d\n```\n\n" +
		"Serve swap devices from boot: a **[[swap]]** table in the file (see **s4d.toml**(5)), the drop-in " +
		"*s4d-swap.conf.example* as */etc/systemd/system/s4d.service.d/swap.conf*, then:\n\n" +
		"```\nsystemctl enable --now s4d.service\n```\n",
	"s4d-swap": "Make a 4 GiB device, make it swap, watch it, and remove it:\n\n" +
		"```\ns4d swap add --size 4G\ns4d swap on /dev/ublkb0\ns4d ctl swap\nswapoff /dev/ublkb0 && s4d swap delete /dev/ublkb0\n```\n\n" +
		"At boot, **[[swap]]** tables in **s4d.toml**(5) make the devices, and *s4d-swap@.service* runs **s4d swap on** for each.\n",
	"s4d-swap-delete": "```\ns4d swap delete /dev/ublkb0\ns4d swap delete --all\n```\n",
	"s4d-swap-on":     "```\ns4d swap on /dev/ublkb0\ns4d swap on --priority 50 /dev/ublkb0\n```\n",
}
