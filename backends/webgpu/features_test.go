package webgpu

import (
	"strings"
	"testing"
)

// TestFeatures prints the adapter's feature list (issue 29 asks for it on
// the GPU machine, for both implementations) and checks that the
// description names the zero-copy features and that the subgroups the
// device was opened with are in the list.
func TestFeatures(t *testing.T) {
	b := open(t)
	fs := b.Features()
	t.Logf("features of %s: %s", b.Describe(), featureList(fs))
	if len(fs) == 0 {
		t.Fatal("the adapter reported no feature at all")
	}
	want := "host-mapped-pointer"
	if b.d.native {
		want = "mappable-primary-buffers"
	}
	if !strings.Contains(b.Describe(), want) {
		t.Errorf("description %q does not say whether %s is offered", b.Describe(), want)
	}
	if b.d.subgroups {
		found := false
		for _, f := range fs {
			for _, v := range subgroupFeatures(b.d.native) {
				found = found || f.Value == v
			}
		}
		if !found {
			t.Errorf("device opened with subgroups, but no subgroup feature among %s", featureList(fs))
		}
	}
}
