package bytesize

import "testing"

func TestParse(t *testing.T) {
	for in, want := range map[string]uint64{"0": 0, "4096": 4096, "4K": 4096, "1M": 1 << 20, "2G": 2 << 30, "1GiB": 1 << 30, "3t": 3 << 40,
		// bench's parser took these; the flags now read sizes the same way.
		"64M": 64 << 20, "1g": 1 << 30, "2KiB": 2048, "3MB": 3 << 20, " 8M ": 8 << 20,
		// Fractions, as `--mem-limit 1.5G` is written (issue 26).
		"1.5G": 3 << 29, "0.5K": 512, "2.25M": 9 << 18} {
		if got, err := Parse(in); err != nil || got != want {
			t.Errorf("Parse(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "M", "-1", "1X", "99999999999T", "1.5.2G", "-0.5G", "NaN", "Inf", "1e400", "1e30K", "4 KB!"} {
		if n, err := Parse(bad); err == nil {
			t.Errorf("Parse(%q) accepted: %d", bad, n)
		}
	}
}

func TestFormat(t *testing.T) {
	for n, want := range map[uint64]string{0: "0B", 1023: "1023B", 4096: "4K", 1536: "1.5K", 10 << 20: "10M", 3 << 30: "3G", 3 << 29: "1.5G", 1<<64 - 1: "16E"} {
		if got := Format(n); got != want {
			t.Errorf("Format(%d) = %s, want %s", n, got, want)
		}
	}
	// What is printed reads back as (about) what it was.
	for _, n := range []uint64{4096, 1536, 3 << 29, 10 << 20} {
		if back, err := Parse(Format(n)); err != nil || back != n {
			t.Errorf("Parse(Format(%d)) = %d, %v", n, back, err)
		}
	}
}
