package daemon

import (
	"testing"
	"time"

	"github.com/s4d-project/s4d/ipc"
)

func TestRequestLatency(t *testing.T) {
	d1, d2 := &Daemon{}, &Daemon{}
	d1.observe(ipc.OpPut, 7*time.Microsecond) // under the first bound
	d1.observe(ipc.OpPut, time.Minute)        // past every bound
	d1.observe(ipc.OpGet, 3*time.Millisecond)
	got := d1.RequestLatency()
	if len(got) != 2 {
		t.Fatalf("want PUT and GET, got %+v", got)
	}
	byOp := map[string]OpLatency{}
	for _, o := range got {
		byOp[o.Op] = o
	}
	put, get := byOp["put"], byOp["get"]
	if len(put.Counts) != len(LatencyBounds)+1 || put.Counts[0] != 1 || put.Counts[len(put.Counts)-1] != 1 || put.Sum != time.Minute+7*time.Microsecond {
		t.Fatalf("put %+v", put)
	}
	// 3 ms falls in the bucket bounded by 5 ms.
	for i, b := range LatencyBounds {
		if want := uint64(map[bool]int{true: 1}[b == 5e-3]); get.Counts[i] != want {
			t.Fatalf("get bucket <= %v holds %d", b, get.Counts[i])
		}
	}
	if len(d2.RequestLatency()) != 0 {
		t.Fatal("one daemon's requests counted for another")
	}
}
