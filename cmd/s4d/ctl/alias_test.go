package ctl

import (
	"strings"
	"testing"
)

// The store's codec column is CODEC, as the configuration and the clients
// name it; --output still takes zramctl's ALGORITHM, and the help lists
// only the one name.
func TestCodecColumn(t *testing.T) {
	for _, out := range []string{"codec", "algorithm", "+ALGORITHM"} {
		cols, err := storeTable.pick(out)
		if err != nil || cols[len(cols)-1].name != "CODEC" {
			t.Errorf("--output %s: %v", out, err)
		}
	}
	if strings.Contains(storeTable.help(), "ALGORITHM") {
		t.Error("the column help lists ALGORITHM")
	}
}
