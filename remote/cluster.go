package remote

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

const numSlots = 16384

type shard struct {
	master   string
	replicas []string
}

// Cluster routes commands to the masters of a Valkey/Redis cluster (or to
// one node that has cluster support disabled), following MOVED and ASK.
// A node that fails is marked down and its commands fail at once until it
// answers again or a failover moves its slots (health.go). Safe for
// concurrent use.
type Cluster struct {
	o Options

	mu     sync.RWMutex
	slots  [numSlots]*shard
	shards map[string]*shard // by master address
	nodes  map[string]*node

	refreshMu sync.Mutex
	stats     struct{ moved, ask, retried, refreshed atomic.Uint64 }

	// The prober (health.go): kick wakes it, quit stops it, probed is
	// closed when it has returned.
	kick, quit, probed chan struct{}
	probing            bool
	closeOnce          sync.Once
}

// Stats counts the cluster's redirects and retries since Dial.
type Stats struct {
	Moved, Ask, Retried, Refreshed uint64
}

func (c *Cluster) Stats() Stats {
	return Stats{c.stats.moved.Load(), c.stats.ask.Load(), c.stats.retried.Load(), c.stats.refreshed.Load()}
}

// Dial reads the cluster's slot map from the first seed that answers.
func Dial(ctx context.Context, o Options) (*Cluster, error) {
	o = o.withDefaults()
	if len(o.Addrs) == 0 {
		return nil, errors.New("remote: no seed addresses")
	}
	c := &Cluster{o: o, shards: map[string]*shard{}, nodes: map[string]*node{},
		kick: make(chan struct{}, 1), quit: make(chan struct{}), probed: make(chan struct{})}
	if err := c.refresh(ctx); err != nil {
		c.Close()
		return nil, err
	}
	c.probing = true
	go c.probeLoop()
	return c, nil
}

// Close stops the prober and drops the idle connections; in-flight calls
// finish on their own.
func (c *Cluster) Close() {
	c.closeOnce.Do(func() {
		close(c.quit)
		if c.probing {
			<-c.probed
		}
	})
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, n := range c.nodes {
		n.closeIdle()
	}
}

func (c *Cluster) node(addr string) *node {
	c.mu.RLock()
	n := c.nodes[addr]
	c.mu.RUnlock()
	if n != nil {
		return n
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if n = c.nodes[addr]; n == nil {
		n = &node{addr: addr, idle: make(chan *conn, c.o.PoolSize)}
		c.nodes[addr] = n
	}
	return n
}

// Masters lists the masters of the current slot map.
func (c *Cluster) Masters() []string {
	c.mu.RLock()
	defer c.mu.RUnlock()
	var out []string
	for a := range c.shards {
		out = append(out, a)
	}
	return out
}

// refresh replaces the slot map with one node's CLUSTER SLOTS, asking the
// known nodes first, then the seeds. A refused authentication ends it at
// once: every node has the same users.
func (c *Cluster) refresh(ctx context.Context) error {
	c.refreshMu.Lock()
	defer c.refreshMu.Unlock()
	var cands []string
	seen := map[string]bool{}
	add := func(a string) {
		if !seen[a] {
			seen[a] = true
			cands = append(cands, a)
		}
	}
	c.mu.RLock()
	for _, s := range c.shards {
		add(s.master)
		for _, r := range s.replicas {
			add(r)
		}
	}
	c.mu.RUnlock()
	for _, a := range c.o.Addrs {
		add(a)
	}
	var errs []error
	for _, addr := range cands {
		// A node marked down is asked by the prober, not here: a hung
		// one would hold up every refresh for the tier's timeout.
		if c.node(addr).h.down.Load() {
			errs = append(errs, fmt.Errorf("remote: %s: %w", addr, ErrNodeDown))
			continue
		}
		shards, err := c.fetchSlots(ctx, addr)
		if err == nil {
			c.stats.refreshed.Add(1)
			c.install(shards)
			return nil
		}
		if errors.Is(err, ErrAuthFailed) || ctx.Err() != nil {
			return err
		}
		if !errors.Is(err, errSlotMap) {
			c.noteDown(addr, err, false)
		}
		errs = append(errs, err)
	}
	return fmt.Errorf("remote: no node gave the slot map: %w", errors.Join(errs...))
}

// Cmd is one command and the key that routes it.
type Cmd struct {
	Key   []byte
	Args  [][]byte
	Write bool // counts only once MinReplicas replicas acknowledge it (WAIT)
}

// Reply is one command's answer: a value, or why there is none. An error
// reply from the server is in Err, not Val.
type Reply struct {
	Val Value
	Err error
}

// ErrNotReplicated is a write its master took but too few replicas
// acknowledged within WaitTimeout: it may be lost with the master.
var ErrNotReplicated = errors.New("remote: write not acknowledged by enough replicas")

// ErrNoRoute is a key whose slot no node serves.
var ErrNoRoute = errors.New("remote: no node serves the slot")

type pending struct {
	i      int
	addr   string
	asking bool
	err    error // why it is being retried
}

type roundOut struct {
	mu      sync.Mutex
	retry   []pending
	refresh bool
	sleep   bool
}

func (r *roundOut) again(p pending, err error, refresh, sleep bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	p.err = err
	r.retry = append(r.retry, p)
	r.refresh = r.refresh || refresh
	r.sleep = r.sleep || sleep
}

// Do runs cmds, pipelined: one connection per master and round, every
// master at once. Commands redirected or refused during a failover are
// retried until Options.RetryFor, so they must be idempotent (SET, GET,
// DEL are). The whole call ends within the tier's timeout (RetryFor): a
// node that does not answer in time, or cannot be reached, is marked down
// and its commands fail with a NodeDownError, and commands for a node
// already down fail at once, without holding up the others. Each command
// gets its own Reply.
func (c *Cluster) Do(ctx context.Context, cmds []Cmd) []Reply {
	out := make([]Reply, len(cmds))
	todo := make([]pending, len(cmds))
	for i := range cmds {
		todo[i] = pending{i: i}
	}
	dctx, cancel := context.WithTimeout(ctx, c.o.RetryFor)
	defer cancel()
	backoff := 10 * time.Millisecond
	for {
		groups := map[string][]pending{}
		var ro roundOut
		for _, p := range todo {
			if !p.asking {
				addr, ok := c.route(cmds[p.i].Key)
				if !ok {
					ro.again(p, ErrNoRoute, true, true)
					continue
				}
				p.addr = addr
			}
			if err := c.node(p.addr).downErr(); err != nil {
				out[p.i].Err = err
				continue
			}
			groups[p.addr] = append(groups[p.addr], p)
		}
		var wg sync.WaitGroup
		for addr, g := range groups {
			wg.Add(1)
			go func() {
				defer wg.Done()
				c.runGroup(ctx, dctx, addr, cmds, g, out, &ro)
			}()
		}
		wg.Wait()
		todo = ro.retry
		if len(todo) == 0 {
			return out
		}
		c.stats.retried.Add(uint64(len(todo)))
		if dctx.Err() != nil {
			for _, p := range todo {
				out[p.i].Err = giveUp(ctx, c.o.RetryFor, p.err)
			}
			return out
		}
		if ro.refresh {
			c.refresh(dctx) // failing here is fine: the next round retries
		}
		if ro.sleep {
			t := time.NewTimer(backoff)
			select {
			case <-dctx.Done():
			case <-t.C:
			}
			t.Stop()
			backoff = min(2*backoff, 250*time.Millisecond)
		}
	}
}

// giveUp is the error of a command still refused or redirected when the
// call's time is up: the caller's deadline, or the tier's timeout.
func giveUp(ctx context.Context, retryFor time.Duration, cause error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("remote: the caller gave up (%v) while retrying: %w", ctx.Err(), cause)
	}
	return fmt.Errorf("remote: gave up after %v (the tier's timeout): %w", retryFor, cause)
}

// runGroup runs one round's commands for one node. ctx is the caller's,
// dctx ends with the call's time: a node that fails while the caller still
// waits is marked down (one whose idle connection broke gets one more try
// on a new connection, the server may have closed an idle one).
func (c *Cluster) runGroup(ctx, dctx context.Context, addr string, cmds []Cmd, g []pending, out []Reply, ro *roundOut) {
	n := c.node(addr)
	nodeFailed := func(err error, reused bool) {
		if errors.Is(err, ErrAuthFailed) || ctx.Err() != nil {
			for _, p := range g {
				if ctx.Err() != nil {
					out[p.i].Err = fmt.Errorf("remote: %s: the caller gave up (%v): %w", addr, ctx.Err(), err)
				} else {
					out[p.i].Err = err
				}
			}
			return
		}
		var ne net.Error
		if reused && dctx.Err() == nil && !(errors.As(err, &ne) && ne.Timeout()) {
			n.closeIdle()
			for _, p := range g {
				ro.again(p, fmt.Errorf("remote: %s: %w", addr, err), false, false)
			}
			return
		}
		down := c.markDown(addr, err)
		for _, p := range g {
			out[p.i].Err = down
		}
	}
	cn, reused, err := n.get(dctx, &c.o)
	if err != nil {
		nodeFailed(err, false)
		return
	}
	list := make([][][]byte, 0, len(g)+1)
	pos := make([]int, len(g))
	writes := false
	for j, p := range g {
		if p.asking {
			list = append(list, args("ASKING"))
		}
		pos[j] = len(list)
		list = append(list, cmds[p.i].Args)
		writes = writes || cmds[p.i].Write
	}
	want := 0
	if writes && c.o.MinReplicas > 0 {
		want = min(c.o.MinReplicas, c.replicaCount(addr))
	}
	if want > 0 {
		ms := strconv.FormatInt(c.o.WaitTimeout.Milliseconds(), 10)
		list = append(list, args("WAIT", strconv.Itoa(want), ms))
	}
	vals, err := cn.pipeline(dctx, list)
	n.put(cn)
	if err != nil {
		nodeFailed(err, reused)
		return
	}
	acked, waitErr := want, error(nil)
	if want > 0 {
		w := vals[len(vals)-1]
		// Anything but an integer reply (an error, a NOPERM) counts as no
		// replica: a write is durable only on the cluster's say-so.
		switch waitErr = w.Err(); {
		case waitErr != nil:
			acked = 0
		case w.Kind != ':':
			acked, waitErr = 0, protoErr("WAIT answered type %q", w.Kind)
		default:
			acked = int(w.Int)
		}
	}
	for j, p := range g {
		v := vals[pos[j]]
		e := v.Err()
		if e == nil {
			if cmds[p.i].Write && acked < want {
				out[p.i] = Reply{Val: v, Err: fmt.Errorf("%w: %d of %d replicas of %s (%v)", ErrNotReplicated, acked, want, addr, waitErr)}
			} else {
				out[p.i] = Reply{Val: v}
			}
			continue
		}
		se := e.(ServerError)
		switch se.Code() {
		case "MOVED", "ASK":
			f := strings.Fields(string(se))
			slot, perr := strconv.Atoi(f[min(1, len(f)-1)])
			if len(f) != 3 || perr != nil {
				out[p.i].Err = protoErr("bad redirect %q", string(se))
				continue
			}
			to := f[2]
			if h, port, err := net.SplitHostPort(to); err == nil && h == "" {
				host, _, _ := net.SplitHostPort(addr)
				to = net.JoinHostPort(host, port)
			}
			if se.Code() == "MOVED" {
				c.stats.moved.Add(1)
				c.moved(slot, to)
				ro.again(pending{i: p.i}, e, true, false)
			} else {
				c.stats.ask.Add(1)
				ro.again(pending{i: p.i, addr: to, asking: true}, e, false, false)
			}
		case "CLUSTERDOWN":
			// With a master down that has no replica this is no passing
			// failover state: the cluster serves no slot until the node
			// is back (unless the operator set
			// cluster-require-full-coverage no), and waiting would only
			// make every call wait the tier's timeout. With a replica,
			// it lasts until the replica is promoted: retried.
			if c.downWithoutReplica() {
				out[p.i].Err = fmt.Errorf("remote: %s: %w (a master without a replica is down, and the cluster serves no slot while a master is lost unless cluster-require-full-coverage is no)", addr, e)
				continue
			}
			ro.again(pending{i: p.i}, e, false, true)
		case "TRYAGAIN", "LOADING", "MASTERDOWN", "BUSY":
			ro.again(pending{i: p.i}, e, false, true)
		case "READONLY":
			ro.again(pending{i: p.i}, e, true, true)
		default:
			out[p.i].Err = fmt.Errorf("remote: %s: %w", addr, e)
		}
	}
}

// CheckNoEviction asks every node for its maxmemory-policy and refuses
// any other than noeviction: a block evicted is a page lost. A user that
// may not run CONFIG GET gets an error that says so; the operator must
// then state the policy (the caller's flag) instead.
func (c *Cluster) CheckNoEviction(ctx context.Context) error {
	c.mu.RLock()
	var addrs []string
	for _, s := range c.shards {
		addrs = append(addrs, s.master)
		addrs = append(addrs, s.replicas...)
	}
	c.mu.RUnlock()
	for _, addr := range addrs {
		n := c.node(addr)
		cn, _, err := n.get(ctx, &c.o)
		if err != nil {
			return fmt.Errorf("remote: checking maxmemory-policy: %w", err)
		}
		vs, err := cn.pipeline(ctx, [][][]byte{args("CONFIG", "GET", "maxmemory-policy")})
		n.put(cn)
		if err != nil {
			return fmt.Errorf("remote: checking maxmemory-policy on %s: %w", addr, err)
		}
		if e := vs[0].Err(); e != nil {
			return fmt.Errorf("remote: cannot read maxmemory-policy on %s (%v): grant the user +config|get, or state the policy with the flag", addr, e)
		}
		el := vs[0].Elems
		if len(el) != 2 || string(el[0].Str) != "maxmemory-policy" {
			return protoErr("CONFIG GET maxmemory-policy from %s", addr)
		}
		if p := string(el[1].Str); p != "noeviction" {
			return fmt.Errorf("remote: %s has maxmemory-policy %s; the cold tier needs noeviction (an evicted block is a lost page): CONFIG SET maxmemory-policy noeviction on every node", addr, p)
		}
	}
	return nil
}

// Scan calls fn with every key matching the glob pattern match on every
// master, SCAN by SCAN. A scan that overlaps a failover or a resharding
// may miss keys or see one twice: a sweep built on it runs again later.
func (c *Cluster) Scan(ctx context.Context, match string, fn func(key []byte) error) error {
	for _, addr := range c.Masters() {
		n := c.node(addr)
		if err := n.downErr(); err != nil {
			return fmt.Errorf("remote: scan: %w", err)
		}
		cursor := "0"
		for {
			cn, _, err := n.get(ctx, &c.o)
			if err != nil {
				return fmt.Errorf("remote: scan %s: %w", addr, err)
			}
			vs, err := cn.pipeline(ctx, [][][]byte{args("SCAN", cursor, "MATCH", match, "COUNT", "1000")})
			n.put(cn)
			if err != nil {
				return fmt.Errorf("remote: scan %s: %w", addr, err)
			}
			v := vs[0]
			if e := v.Err(); e != nil {
				return fmt.Errorf("remote: scan %s: %w", addr, e)
			}
			if len(v.Elems) != 2 || v.Elems[0].Kind != '$' {
				return protoErr("SCAN reply from %s", addr)
			}
			for _, k := range v.Elems[1].Elems {
				if err := fn(k.Str); err != nil {
					return err
				}
			}
			if cursor = string(v.Elems[0].Str); cursor == "0" {
				break
			}
		}
	}
	return nil
}
