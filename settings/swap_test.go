package settings

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSwapTables(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s4d.toml")
	os.WriteFile(path, []byte("codec = \"lz4\"\n[[swap]]\nsize = \"50%\"\nmax_size = \"1G\"\npriority = 100\n\n[[swap]]\nsize = \"64M\"\nqueues = 2\ndepth = 32\ncodec = \"zstd\"\nmem_limit = \"256M\"\nwriteback = \"/srv/swap\"\n"), 0o644)
	c, err := Load(path, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Swap) != 2 {
		t.Fatalf("%d swap tables, want 2", len(c.Swap))
	}
	a, b := c.Swap[0], c.Swap[1]
	if a.Bytes(8<<30) != 1<<30 || a.Bytes(1<<30) != 512<<20 || a.Priority != 100 {
		t.Errorf("first: %+v (%d bytes of 8G, %d of 1G)", a, a.Bytes(8<<30), a.Bytes(1<<30))
	}
	if b.Bytes(8<<30) != 64<<20 || b.Queues != 2 || b.Depth != 32 || b.Codec != "zstd" || b.Priority != DefaultSwapPriority ||
		b.MemLimit != 256<<20 || b.Writeback != "/srv/swap" || a.MemLimit != 0 {
		t.Errorf("second: %+v", b)
	}
	for _, bad := range []string{"[[swap]]\nqueues = 2\n", "[[swap]]\nsize = \"0%\"\n", "[[swap]]\nsize = \"1G\"\nspeed = 3\n",
		"[[swap]]\nsize = \"1G\"\ncodec = \"gzip\"\n", "swap = 3\n", "[[swap]]\nsize = \"1G\"\ndepth = 5000\n", "[[swap]]\nsize = \"1G\"\npriority = -1\n",
		"[[swap]]\nsize = \"1G\"\nwriteback = \"relative/dir\"\n", "[[swap]]\nsize = \"1G\"\nmem_limit = \"lots\"\n"} {
		os.WriteFile(path, []byte(bad), 0o644)
		if _, err := Load(path, true, nil); err == nil || !strings.Contains(err.Error(), "swap") {
			t.Errorf("%q: got %v, want an error about swap", bad, err)
		}
	}
}

// Every key a [[swap]] table takes is documented in SwapKeys, and nothing
// else is: s4d.toml(5) is written from it.
func TestSwapKeysDocumented(t *testing.T) {
	doc := map[string]bool{}
	for _, k := range SwapKeys {
		doc[k.Key] = true
		if swapFields[k.Key] == nil {
			t.Errorf("SwapKeys documents %q, which [[swap]] does not take", k.Key)
		}
	}
	for k := range swapFields {
		if !doc[k] {
			t.Errorf("[[swap]] takes %q, which SwapKeys does not document", k)
		}
	}
}
