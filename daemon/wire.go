package daemon

import (
	"time"

	"github.com/s4d-project/s4d/cold"
	"github.com/s4d-project/s4d/ipc"
	"github.com/s4d-project/s4d/routing"
)

// Conversions of the core's own types into their wire form: the packages
// below the daemon know nothing of ipc.

func backendStats(in []routing.BackendStats) []ipc.BackendStats {
	out := make([]ipc.BackendStats, 0, len(in))
	for _, b := range in {
		bs := ipc.BackendStats{Name: b.Name, State: string(b.State), Reason: b.Reason, Describe: b.Describe, InUse: b.InUse,
			Engine: b.Engine, Device: b.Device, InFlight: b.InFlight}
		for _, c := range b.Counters {
			bs.Counters = append(bs.Counters, ipc.CodecCounters{Codec: c.Codec.String(), Direction: c.Direction,
				Batches: c.Batches, Pages: c.Pages, BytesIn: c.BytesIn, BytesOut: c.BytesOut, Errors: c.Errors})
		}
		out = append(out, bs)
	}
	return out
}

func recompressResult(r cold.Result) ipc.RecompressResult {
	return ipc.RecompressResult{Runs: r.Runs, PagesTried: r.PagesTried, PagesKept: r.PagesKept, PagesChanged: r.PagesChanged,
		BytesBefore: r.BytesBefore, BytesSaved: r.BytesSaved, BytesIn: r.BytesIn, Seconds: r.Seconds, Backend: r.Backend}
}

// checkAge refuses, as MALFORMED, an age the idle epochs cannot tell.
func (c *conn) checkAge(age time.Duration) error {
	if err := c.d.cold.CheckAge(age); err != nil {
		return &ipc.Error{Code: ipc.CodeMalformed, Msg: err.Error()}
	}
	return nil
}
