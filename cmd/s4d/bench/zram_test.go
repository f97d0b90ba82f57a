package bench

import (
	"strings"
	"testing"
)

// MeasureZram refuses, before it touches any device, I/Os zram cannot do:
// O_DIRECT on zram is in whole 4096-byte blocks.
func TestMeasureZramRefusesPartialBlocks(t *testing.T) {
	for _, c := range []struct {
		pageSize, batch, pages int
		want                   string
	}{{2048, 1, 4, "whole 4096-byte blocks"}, {2048, 3, 6, "whole 4096-byte blocks"}, {4096, 1, 0, "no pages"}} {
		_, err := MeasureZram(make([]byte, c.pageSize*c.pages), c.pageSize, c.batch, 1)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("page size %d, batch %d, %d pages: err %v, want one saying %q", c.pageSize, c.batch, c.pages, err, c.want)
		}
	}
}
