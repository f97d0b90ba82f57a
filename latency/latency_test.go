package latency

import (
	"testing"
	"time"

	"github.com/s4d-project/s4d/ipc"
)

func TestRecorder(t *testing.T) {
	var r1, r2 Recorder
	r1.Observe(ipc.OpPut, 7*time.Microsecond) // under the first bound
	r1.Observe(ipc.OpPut, time.Minute)        // past every bound
	r1.Observe(ipc.OpGet, 3*time.Millisecond)
	got := r1.Histograms()
	if len(got) != 2 {
		t.Fatalf("want PUT and GET, got %+v", got)
	}
	byOp := map[string]Op{}
	for _, o := range got {
		byOp[o.Op] = o
	}
	put, get := byOp["put"], byOp["get"]
	if len(put.Counts) != len(Bounds)+1 || put.Counts[0] != 1 || put.Counts[len(put.Counts)-1] != 1 || put.Sum != time.Minute+7*time.Microsecond {
		t.Fatalf("put %+v", put)
	}
	// 3 ms falls in the bucket bounded by 5 ms.
	for i, b := range Bounds {
		if want := uint64(map[bool]int{true: 1}[b == 5e-3]); get.Counts[i] != want {
			t.Fatalf("get bucket <= %v holds %d", b, get.Counts[i])
		}
	}
	if len(r2.Histograms()) != 0 {
		t.Fatal("one recorder's requests counted for another")
	}
}
