// Package bytesize is how every s4d command reads and prints sizes:
// K, M, G, T as powers of 1024, as zramctl and the kernel write them.
package bytesize

import (
	"fmt"
	"strings"

	units "github.com/docker/go-units"
)

// maxSize bounds what Parse accepts: go-units converts a float to
// int64, which is not defined past 2^63, and no memory is that large.
const maxSize = 1 << 62

// Parse reads a byte count with an optional K, M, G, T or P suffix,
// powers of 1024 as zramctl and the kernel use them ("64M", "1.5G",
// "2KiB"); a fraction is allowed and rounded down to whole bytes. "0"
// means none. This is the one parser of sizes: flags, the configuration
// file, `s4d run` and `s4d bench` all read sizes through it.
func Parse(s string) (uint64, error) {
	n, err := units.RAMInBytes(strings.TrimSpace(s))
	if err != nil || n < 0 || n > maxSize {
		return 0, fmt.Errorf("size %q: want a number of bytes with an optional K, M, G or T suffix (powers of 1024; 1.5G is allowed)", s)
	}
	return uint64(n), nil
}

// Format prints a byte count as zramctl does, with the same binary
// suffixes Parse reads: 0B, 1023B, 4K, 1.5M, 10M, 3G. Below ten a
// fraction is kept to one digit; whole values and larger ones have none.
func Format(n uint64) string {
	const suffixes = "BKMGTPE"
	v, i := float64(n), 0
	for v >= 1024 && i < len(suffixes)-1 {
		v /= 1024
		i++
	}
	if i == 0 || v >= 10 || v == float64(uint64(v)) {
		return fmt.Sprintf("%.0f%c", v, suffixes[i])
	}
	return fmt.Sprintf("%.1f%c", v, suffixes[i])
}
