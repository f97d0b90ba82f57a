package routing

import (
	"strings"

	"github.com/s4d-project/s4d/backends"
	"github.com/s4d-project/s4d/pagefmt"
)

// BackendStats is one backend as the router sees it: its state, and what
// it has done for each codec and direction. The daemon turns it into its
// answer on the wire.
type BackendStats struct {
	backends.Status
	InUse    bool // the backend batches go to first now
	Counters []Counters
	// A device of an engine with several (Device): the engine, the
	// device's number (its name past the engine's), and batches in flight.
	Engine, Device string
	InFlight       int64
}

// Counters count one backend's work with one codec in one direction.
type Counters struct {
	Codec                                     pagefmt.Codec
	Direction                                 string // "compress" or "decompress"
	Batches, Pages, BytesIn, BytesOut, Errors uint64
}

// Stats reports every backend with its counters.
func (r *Router) Stats() []BackendStats {
	inUse := r.InUse()
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []BackendStats
	for _, st := range r.set.Statuses() {
		bs := BackendStats{Status: st, InUse: st.Name == inUse, InFlight: r.Load(st.Name)}
		// A failed device has left the set: its engine is remembered.
		if be, ok := r.set.Get(st.Name); ok {
			if d, ok := be.(Device); ok {
				r.engines[st.Name] = d.Engine()
			}
		}
		if eng, ok := r.engines[st.Name]; ok {
			bs.Engine, bs.Device = eng, strings.TrimPrefix(st.Name, eng)
		}
		for _, dir := range []string{"compress", "decompress"} {
			for _, codec := range []pagefmt.Codec{pagefmt.CodecLZ4, pagefmt.CodecZstd} {
				c := r.ctr[ctrKey{st.Name, codec, dir}]
				if c == nil {
					continue
				}
				bs.Counters = append(bs.Counters, Counters{Codec: codec, Direction: dir,
					Batches: c.batches.Load(), Pages: c.pages.Load(), BytesIn: c.in.Load(),
					BytesOut: c.out.Load(), Errors: c.errors.Load()})
			}
		}
		out = append(out, bs)
	}
	return out
}
