package remote

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

// A node that fails a call (no connection, no answer within the tier's
// timeout, a connection that breaks) is marked down. From then on every
// command for its slots fails at once with a NodeDownError, so that one
// lost node costs its own pages only, and only once the tier's timeout;
// the commands for other nodes of the same call go on. A prober, every
// ProbeEvery while some node is down, reads the slot map again from a
// live node (a failover gives the down master's slots to a replica, and
// then they are served by it) and PINGs the down nodes over a fresh
// connection: one that answers is up again.

// ErrNodeDown is what every NodeDownError is (errors.Is).
var ErrNodeDown = errors.New("remote: node down")

// NodeDownError is a command refused at once because the node serving
// its slot is marked down.
type NodeDownError struct {
	Addr  string
	Since time.Time
	Cause string // why it was marked down
}

func (e *NodeDownError) Error() string {
	return fmt.Sprintf("remote: node %s down since %s (%s ago): %s", e.Addr,
		e.Since.UTC().Format(time.RFC3339), time.Since(e.Since).Round(time.Second), e.Cause)
}

func (e *NodeDownError) Is(target error) bool { return target == ErrNodeDown }

// health is one node's state as the calls and the prober found it.
type health struct {
	down      atomic.Bool // read on every command: no lock
	mu        sync.Mutex
	since     time.Time
	cause     string
	downs     uint64        // times marked down
	fastFails atomic.Uint64 // commands refused at once while down
}

// downErr is the error for a command routed to n, nil while n is up.
func (n *node) downErr() error {
	if !n.h.down.Load() {
		return nil
	}
	n.h.mu.Lock()
	defer n.h.mu.Unlock()
	if !n.h.down.Load() {
		return nil
	}
	n.h.fastFails.Add(1)
	return &NodeDownError{Addr: n.addr, Since: n.h.since, Cause: n.h.cause}
}

// markDown records that addr failed a call with err, and wakes the
// prober. Its idle connections go: they lead to the same node.
func (c *Cluster) markDown(addr string, err error) *NodeDownError {
	return c.noteDown(addr, err, true)
}

// noteDown is markDown; the prober, finding a node still down, does not
// wake itself again.
func (c *Cluster) noteDown(addr string, err error, kick bool) *NodeDownError {
	n := c.node(addr)
	n.h.mu.Lock()
	if !n.h.down.Load() {
		n.h.since = time.Now()
		n.h.downs++
		n.h.down.Store(true)
	}
	n.h.cause = causeOf(err, c.o.Timeout)
	e := &NodeDownError{Addr: addr, Since: n.h.since, Cause: n.h.cause}
	n.h.mu.Unlock()
	n.closeIdle()
	if kick {
		select {
		case c.kick <- struct{}{}:
		default:
		}
	}
	return e
}

func (c *Cluster) markUp(addr string) {
	n := c.node(addr)
	n.h.mu.Lock()
	n.h.down.Store(false)
	n.h.mu.Unlock()
}

// causeOf says why a node failed in words an operator can act on: a
// deadline becomes "no answer within", never a bare "context deadline
// exceeded".
func causeOf(err error, timeout time.Duration) string {
	var ne net.Error
	if errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()) {
		return fmt.Sprintf("no answer within %v (the tier's timeout)", timeout)
	}
	return err.Error()
}

// KeyDown is the NodeDownError of the node serving key's slot, or nil
// while it is up (or the slot has no node yet).
func (c *Cluster) KeyDown(key []byte) error {
	addr, ok := c.route(key)
	if !ok {
		return nil
	}
	return c.node(addr).downErr()
}

// NodeState is one node of the slot map as the tier sees it.
type NodeState struct {
	Addr      string
	Master    bool // serves slots (else a replica)
	Slots     int  // slots it serves, for a master
	Down      bool
	Since     time.Time // when it was marked down (while down)
	Cause     string    // why (while down)
	Downs     uint64    // times marked down since Dial
	FastFails uint64    // commands refused at once while it was down
}

// Nodes describes every node of the current slot map, masters first.
func (c *Cluster) Nodes() []NodeState {
	c.mu.RLock()
	slots := map[*shard]int{}
	for _, sh := range c.slots {
		if sh != nil {
			slots[sh]++
		}
	}
	var out []NodeState
	seen := map[string]bool{}
	for _, sh := range c.shards {
		if slots[sh] == 0 {
			continue
		}
		for i, a := range append([]string{sh.master}, sh.replicas...) {
			if !seen[a] {
				seen[a] = true
				out = append(out, NodeState{Addr: a, Master: i == 0, Slots: slots[sh] * b2i(i == 0)})
			}
		}
	}
	c.mu.RUnlock()
	for i := range out {
		n := c.node(out[i].Addr)
		n.h.mu.Lock()
		out[i].Down = n.h.down.Load()
		if out[i].Down {
			out[i].Since, out[i].Cause = n.h.since, n.h.cause
		}
		out[i].Downs = n.h.downs
		n.h.mu.Unlock()
		out[i].FastFails = n.h.fastFails.Load()
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Master != out[j].Master {
			return out[i].Master
		}
		return out[i].Addr < out[j].Addr
	})
	return out
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// downWithoutReplica tells whether a master of the slot map is down with
// no replica to take its slots over.
func (c *Cluster) downWithoutReplica() bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	for a, sh := range c.shards {
		if n := c.nodes[a]; len(sh.replicas) == 0 && n != nil && n.h.down.Load() {
			return true
		}
	}
	return false
}

// MastersDown counts the masters of the slot map marked down.
func (c *Cluster) MastersDown() int {
	n := 0
	for _, s := range c.Nodes() {
		if s.Master && s.Down {
			n++
		}
	}
	return n
}

// probeLoop runs until Close: every ProbeEvery, and at once when a node
// is marked down, it probes while some node is down.
func (c *Cluster) probeLoop() {
	defer close(c.probed)
	t := time.NewTicker(c.o.ProbeEvery)
	defer t.Stop()
	for {
		select {
		case <-c.quit:
			return
		case <-c.kick:
		case <-t.C:
		}
		c.probe()
	}
}

func (c *Cluster) downAddrs() []string {
	c.mu.RLock()
	defer c.mu.RUnlock()
	var out []string
	for a, n := range c.nodes {
		if n.h.down.Load() {
			out = append(out, a)
		}
	}
	return out
}

// probe PINGs every master of the slot map and every node marked down,
// all at once, within the tier's timeout: a master lost while no call
// went to it is marked down within a probe, so STATS says so and a
// failover is followed without waiting for a call to fail. A down node
// that answers is up again. While some node is down, the slot map is
// read again afterwards from a live node: a failover moves the lost
// master's slots to its promoted replica.
func (c *Cluster) probe() {
	targets := c.Masters()
	for _, a := range c.downAddrs() {
		if !slices.Contains(targets, a) {
			targets = append(targets, a)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.o.Timeout)
	defer cancel()
	go func() {
		select {
		case <-c.quit:
			cancel()
		case <-ctx.Done():
		}
	}()
	var wg sync.WaitGroup
	for _, a := range targets {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := c.ping(ctx, a); err != nil {
				if ctx.Err() == nil || errors.Is(ctx.Err(), context.DeadlineExceeded) {
					c.noteDown(a, err, false)
				}
				return
			}
			c.markUp(a)
		}()
	}
	wg.Wait()
	if len(c.downAddrs()) > 0 && c.refresh(ctx) == nil {
		c.forgetGone()
	}
}

// forgetGone drops the down nodes the slot map no longer names (a master
// replaced by a failover, a node removed): they serve nothing, and are
// probed no more. Named again later, one starts afresh, as up.
func (c *Cluster) forgetGone() {
	c.mu.Lock()
	defer c.mu.Unlock()
	named := map[string]bool{}
	for _, sh := range c.shards {
		named[sh.master] = true
		for _, r := range sh.replicas {
			named[r] = true
		}
	}
	for a, n := range c.nodes {
		if n.h.down.Load() && !named[a] {
			delete(c.nodes, a)
			n.closeIdle()
		}
	}
}

// ping sends PING on an idle connection (a new one when that one turns
// out closed, the server may drop idle ones) and wants PONG.
func (c *Cluster) ping(ctx context.Context, addr string) error {
	n := c.node(addr)
	for try := 0; ; try++ {
		cn, reused, err := n.get(ctx, &c.o)
		if err != nil {
			return err
		}
		vs, err := cn.pipeline(ctx, [][][]byte{args("PING")})
		n.put(cn)
		if err == nil {
			return vs[0].Err()
		}
		var ne net.Error
		if !reused || try > 0 || ctx.Err() != nil || (errors.As(err, &ne) && ne.Timeout()) {
			return err
		}
	}
}
