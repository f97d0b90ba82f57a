package daemon

import "testing"

func TestParseSize(t *testing.T) {
	for in, want := range map[string]uint64{"0": 0, "4096": 4096, "4K": 4096, "1M": 1 << 20, "2G": 2 << 30, "1GiB": 1 << 30, "3t": 3 << 40} {
		if got, err := ParseSize(in); err != nil || got != want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "M", "-1", "1X", "99999999999T"} {
		if _, err := ParseSize(bad); err == nil {
			t.Errorf("ParseSize(%q) accepted", bad)
		}
	}
}

func TestValidate(t *testing.T) {
	c := Defaults()
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, ps := range []int{0, 2048, 5000, 131072} {
		c := Defaults()
		c.PageSize = ps
		if c.Validate() == nil {
			t.Errorf("page size %d accepted", ps)
		}
	}
	c.Codec = "gzip"
	if c.Validate() == nil {
		t.Error("codec gzip accepted")
	}
}
