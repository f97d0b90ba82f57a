package ublk

import (
	"bufio"
	"os"
	"strings"
)

// ActiveSwaps is the set of devices in /proc/swaps: the daemon uses it to
// tell a device that left swap, `s4d ctl swap` to print [SWAP] as zramctl
// does. A kernel without swap support has no such file: an empty set.
func ActiveSwaps() map[string]bool {
	out := map[string]bool{}
	f, err := os.Open("/proc/swaps")
	if err != nil {
		return out
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if fields := strings.Fields(sc.Text()); len(fields) > 0 && strings.HasPrefix(fields[0], "/") {
			out[fields[0]] = true
		}
	}
	return out
}
