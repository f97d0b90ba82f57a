package bench

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

const sampleMaps = `55d48e600000-55d48e62a000 r--p 00000000 08:01 1835 /usr/bin/python3.11
55d48e62a000-55d48e62c000 rw-p 0002a000 08:01 1835 /usr/bin/python3.11
55d48f000000-55d48f400000 rw-p 00000000 00:00 0                          [heap]
7f3a1c000000-7f3a1c021000 rw-p 00000000 00:00 0
7f3a1d000000-7f3a1d100000 rw-s 00000000 00:05 4242 /dev/shm/shared segment
7f3a1e000000-7f3a1e001000 rw-p 00000000 08:01 99 /tmp/a file with spaces
7f3a1f000000-7f3a1f001000 ---p 00000000 00:00 0
7ffd4a000000-7ffd4a021000 rw-p 00000000 00:00 0                          [stack]
7ffd4a1f0000-7ffd4a1f4000 r--p 00000000 00:00 0                          [vvar]
7ffd4a1f4000-7ffd4a1f6000 r-xp 00000000 00:00 0                          [vdso]
ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0                  [vsyscall]
`

func TestParseMapsKeepsWritablePrivate(t *testing.T) {
	got, err := parseMaps(strings.NewReader(sampleMaps))
	if err != nil {
		t.Fatal(err)
	}
	want := []region{
		{0x55d48e62a000, 0x55d48e62c000, "rw-p", "/usr/bin/python3.11"},
		{0x55d48f000000, 0x55d48f400000, "rw-p", "[heap]"},
		{0x7f3a1c000000, 0x7f3a1c021000, "rw-p", ""},
		{0x7f3a1e000000, 0x7f3a1e001000, "rw-p", "/tmp/a file with spaces"},
		{0x7ffd4a000000, 0x7ffd4a021000, "rw-p", "[stack]"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("parseMaps:\n got %+v\nwant %+v", got, want)
	}
}

func TestParseMapsRejectsGarbage(t *testing.T) {
	for _, bad := range []string{
		"55d4-55d3 rw-p 0 0:0 0\n", // end before start
		"zz-10 rw-p 0 0:0 0\n",
		"1000-2000 rw 0 0:0 0\n",
		"1000-2000 rw-p\n",
	} {
		if _, err := parseMaps(strings.NewReader(bad)); err == nil {
			t.Errorf("parseMaps(%q) accepted it", bad)
		}
	}
}

// marker is a heap buffer the snapshot of this very process must contain.
var marker []byte

func TestSnapshotOwnProcess(t *testing.T) {
	const ps = 4096
	marker = make([]byte, 16*ps)
	for i := range marker {
		marker[i] = byte(i*7 + i/ps)
	}
	snap, err := snapshotPID(os.Getpid(), ps, 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	if len(snap) == 0 || len(snap)%ps != 0 {
		t.Fatalf("snapshot of %d bytes: want a non-empty run of whole pages", len(snap))
	}
	// The marker may straddle page boundaries, but some whole page of it
	// lies page-aligned in the heap, and pages are copied whole and in order.
	if !bytes.Contains(snap, marker[4*ps:8*ps]) {
		t.Error("snapshot of this process lacks a buffer it holds on its heap")
	}

	capped, err := snapshotPID(os.Getpid(), ps, 10*ps+123)
	if err != nil {
		t.Fatal(err)
	}
	if len(capped) != 10*ps {
		t.Errorf("capped snapshot is %d bytes, want %d", len(capped), 10*ps)
	}
	if _, err := snapshotPID(1<<30, ps, 1<<20); err == nil {
		t.Error("snapshot of a process that does not exist succeeded")
	}
}

func TestReadFilePagesDropsPartialPage(t *testing.T) {
	f := filepath.Join(t.TempDir(), "f")
	data := bytes.Repeat([]byte("abcdefg"), 3000) // 21000 bytes: 5 pages and a bit
	if err := os.WriteFile(f, data, 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := readFilePages(f, 4096, 1<<20)
	if err != nil || !bytes.Equal(got, data[:5*4096]) {
		t.Errorf("readFilePages: %d bytes, %v; want the first 5 pages", len(got), err)
	}
	if got, _ := readFilePages(f, 4096, 2*4096+5); len(got) != 2*4096 {
		t.Errorf("with a cap of 2 pages and a bit: %d bytes", len(got))
	}
}

func TestParseSize(t *testing.T) {
	for in, want := range map[string]int64{"0": 0, "4096": 4096, "64M": 64 << 20, "1g": 1 << 30, "2KiB": 2048, "3MB": 3 << 20} {
		if got, err := parseSize(in); err != nil || got != want {
			t.Errorf("parseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "M", "-1", "1X", "99999999999T"} {
		if _, err := parseSize(bad); err == nil {
			t.Errorf("parseSize(%q) accepted it", bad)
		}
	}
}

func TestSyntheticPages(t *testing.T) {
	p, err := syntheticPages("mixed", 4096, 1<<20)
	if err != nil || len(p) != 1<<20 {
		t.Fatalf("syntheticPages: %d bytes, %v", len(p), err)
	}
	q, _ := syntheticPages("mixed", 4096, 1<<20)
	if !bytes.Equal(p, q) {
		t.Error("the same synthetic corpus differs between two calls")
	}
	if _, err := syntheticPages("nonsense", 4096, 1<<20); err == nil {
		t.Error("unknown kind accepted")
	}
}
