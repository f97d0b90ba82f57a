package daemoncmd

import (
	"strings"
	"testing"

	"github.com/s4d-project/s4d/settings"
)

// Every setting has short help under a topic, starting with its
// placeholder, and the table names no setting that does not exist: a new
// setting without a line here fails, as would a line for a removed one.
func TestDaemonHelp(t *testing.T) {
	known := map[string]bool{}
	for _, st := range settings.Table {
		known[st.Name] = true
		h, ok := daemonHelp[st.Name]
		if !ok {
			t.Errorf("--%s has no short help in daemonHelp (it shows under Other: with its full text)", st.Name)
			continue
		}
		if !strings.HasPrefix(h.usage, "`") || strings.Count(h.usage, "`") != 2 {
			t.Errorf("--%s: help %q does not start with its `PLACEHOLDER`", st.Name, h.usage)
		}
		if st.Bool != strings.HasPrefix(h.usage, "`true|false`") {
			t.Errorf("--%s: a boolean's placeholder is true|false, and only a boolean's: %q", st.Name, h.usage)
		}
		if len(h.usage) > 110 {
			t.Errorf("--%s: help of %d characters; one or two lines (the full text is in s4d.toml(5))", st.Name, len(h.usage))
		}
	}
	for name := range daemonHelp {
		if !known[name] {
			t.Errorf("daemonHelp has %q, which is no setting", name)
		}
	}
}
