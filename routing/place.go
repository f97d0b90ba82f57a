package routing

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/s4d-project/s4d/backends"
	"github.com/s4d-project/s4d/internal/topo"
)

// Device is a backend that is one device of an engine with several (a GPU
// of the host: backends.Multi lists them). Devices of one engine are
// peers: a batch goes to the peer nearest its memory and least busy, then
// to the other peers, then down the rest of the chain.
type Device interface {
	Engine() string // the engine's name ("cuda"): --backend cuda means any of its devices
	NUMANode() int  // the NUMA node of the device's link, -1 unknown
}

// farPenalty is how many batches deeper a near device's queue may be
// (and no more) before a batch goes to a far one instead: crossing the socket
// interconnect costs less than waiting behind that many batches.
const farPenalty = 2

// spillAt is the batches in flight on every device of an engine from which
// the next backend of an auto chain (the CPU) takes a batch too, if it has
// none in flight: the GPUs are full, and the CPU's cores are idle.
const spillAt = 4

// loads counts the batches each backend has in flight.
type loads struct{ m sync.Map } // name -> *atomic.Int64

func (l *loads) of(name string) *atomic.Int64 {
	if v, ok := l.m.Load(name); ok {
		return v.(*atomic.Int64)
	}
	v, _ := l.m.LoadOrStore(name, new(atomic.Int64))
	return v.(*atomic.Int64)
}

// Load is how many batches backend name has in flight now.
func (r *Router) Load(name string) int64 { return r.loads.of(name).Load() }

// engineOf is the engine a backend belongs to: its own name unless it is a
// Device.
func engineOf(be backends.Backend) string {
	if d, ok := be.(Device); ok {
		return d.Engine()
	}
	return be.Name()
}

// clientNode is the context key of WithClientNode.
type clientNode struct{}

// WithClientNode marks ctx with the NUMA node nearest the client a request
// serves (topo.ProcNode: its pages, else its CPUs). A batch whose memory
// tells no node (pages in the daemon's own buffers, not faulted in yet)
// goes nearest the client instead.
func WithClientNode(ctx context.Context, node int) context.Context {
	return context.WithValue(ctx, clientNode{}, node)
}

// Spread says whether the devices sit on more than one NUMA node: only
// then is a client's node worth looking up.
func (r *Router) Spread() bool {
	first := -1
	for _, be := range r.set.Usable() {
		if d, ok := be.(Device); ok && d.NUMANode() >= 0 {
			if first >= 0 && d.NUMANode() != first {
				return true
			}
			first = d.NUMANode()
		}
	}
	return false
}

// nodeOf is the NUMA node of the memory a batch is read from or written
// to (a client's memfd, the store): Options.NodeOf, else the page's node
// from the kernel; where neither knows, the client's (WithClientNode).
func (r *Router) nodeOf(ctx context.Context, mem []byte) int {
	var n int
	if r.memNode != nil {
		n = r.memNode(mem)
	} else {
		n = topo.AddrNode(mem)
	}
	if c, ok := ctx.Value(clientNode{}).(int); ok && n < 0 {
		n = c
	}
	return n
}

// place orders the peers of chain (the devices of one engine) for a batch
// whose memory is on node (-1: unknown): gathered where the first of them
// stood, nearest first, then by batches in flight, then as ranked. Chains
// without peers are returned as they are, and the memory is not looked up.
func (r *Router) place(ctx context.Context, chain []backends.Backend, mem []byte) []backends.Backend {
	out := r.order(ctx, chain, mem)
	if len(out) > 1 && r.Preference() == "auto" { // --backend cuda: the CPU only on failure
		out = r.spill(out)
	}
	return out
}

// spill puts first the backend that follows the leading engine's devices
// when every one of them has spillAt batches in flight and it has none.
func (r *Router) spill(chain []backends.Backend) []backends.Backend {
	if _, ok := chain[0].(Device); !ok {
		return chain
	}
	eng := engineOf(chain[0])
	for i, be := range chain {
		if _, ok := be.(Device); ok && engineOf(be) == eng {
			if r.Load(be.Name()) < spillAt {
				return chain
			}
			continue
		}
		if r.Load(be.Name()) > 0 {
			return chain
		}
		out := make([]backends.Backend, 0, len(chain))
		out = append(append(append(out, be), chain[:i]...), chain[i+1:]...)
		return out
	}
	return chain
}

// warmFirst moves the leading backends that are still making mem ready
// (backends.Warming) behind the first that is not: a batch from a
// client's fresh mapping goes to the CPU while the GPU imports the
// mapping, instead of through the GPU's staging copy (on an H200 a first
// GiB so ran at 1.7-3.0 GB/s against the cpu engine's 7-10).
func warmFirst(chain []backends.Backend, mem []byte) []backends.Backend {
	for i, be := range chain {
		if w, ok := be.(backends.Warming); ok && w.Warming(mem) {
			continue
		}
		if i == 0 {
			return chain
		}
		out := make([]backends.Backend, 0, len(chain))
		return append(append(append(out, be), chain[:i]...), chain[i+1:]...)
	}
	return chain // every one is warming: as ranked
}

// order is place without the spill.
func (r *Router) order(ctx context.Context, chain []backends.Backend, mem []byte) []backends.Backend {
	peers := 0
	for _, be := range chain {
		if _, ok := be.(Device); ok {
			peers++
		}
	}
	if peers < 2 {
		return chain
	}
	node := r.nodeOf(ctx, mem)
	out := make([]backends.Backend, 0, len(chain))
	done := map[string]bool{}
	for _, be := range chain {
		eng := engineOf(be)
		if _, ok := be.(Device); !ok {
			out = append(out, be)
			continue
		}
		if done[eng] {
			continue
		}
		done[eng] = true
		var group []backends.Backend
		for _, p := range chain {
			if _, ok := p.(Device); ok && engineOf(p) == eng {
				group = append(group, p)
			}
		}
		cost := func(be backends.Backend) int64 {
			c := r.Load(be.Name())
			if n := be.(Device).NUMANode(); node >= 0 && n >= 0 && n != node {
				c += farPenalty
			}
			return c
		}
		slices.SortStableFunc(group, func(a, b backends.Backend) int {
			ca, cb := cost(a), cost(b)
			switch {
			case ca < cb:
				return -1
			case ca > cb:
				return 1
			}
			return 0
		})
		out = append(out, group...)
	}
	return out
}
