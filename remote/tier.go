package remote

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// TierConfig is what the daemon's settings say about the remote tier.
type TierConfig struct {
	URL       string // valkey://h:p[,h:p...] or valkeys://
	CAFile    string // PEM roots for valkeys:// ("" = the system's)
	CredFile  string // "user\npassword" or "password" ("" = no AUTH)
	KeyFile   string // the master key: 32 bytes or 64 hex digits
	Host      string // the name this host's blocks go under
	Quota     uint64 // bytes this host may keep in the cluster; 0 = no limit
	NoEvictOK bool   // the operator states the policy is noeviction
	// Options overrides the cluster options other than the addresses,
	// TLS and credentials (tests shorten the timeouts).
	Options Options
}

// Tier is the level below the backing file: packed blocks, sealed by a
// Store, kept to a per-host byte quota counted in the cluster itself, so
// that restarts and several processes of one host agree on it.
type Tier struct {
	c     *Cluster
	s     *Store
	host  string
	quota uint64

	// fresh are the keys written and not yet released by the caller (in
	// its index): a sweep never deletes them though no index names them.
	freshMu sync.Mutex
	fresh   map[string]struct{}

	up      atomic.Bool
	lastErr atomic.Value // string
	st      struct {
		blocksW, bytesW, blocksR, bytesR, writeErr, readErr atomic.Uint64
		corrupt, missing, stale, deleted, swept, quotaFull  atomic.Uint64
	}
	lat latHist
}

// ErrQuota is a write this host's quota in the cluster has no room for.
var ErrQuota = errors.New("remote: host quota in the cluster is full")

// OpenTier connects and checks everything that would make the tier lose
// pages later: reachability, credentials, the key, the eviction policy. Its
// error says which, for the daemon to refuse to start with.
func OpenTier(ctx context.Context, tc TierConfig) (*Tier, error) {
	addrs, useTLS, err := ParseURL(tc.URL)
	if err != nil {
		return nil, err
	}
	if tc.KeyFile == "" {
		return nil, errors.New("remote: no encryption key: set --remote-key-file or the systemd credential s4d-remote-key")
	}
	key, err := ReadKey(tc.KeyFile)
	if err != nil {
		return nil, err
	}
	if tc.Host == "" {
		return nil, errors.New("remote: no host name for this host's blocks")
	}
	o := tc.Options
	o.Addrs = addrs
	if tc.CredFile != "" {
		if o.User, o.Password, err = ReadCredentials(tc.CredFile); err != nil {
			return nil, err
		}
	}
	if useTLS {
		o.TLS = &tls.Config{MinVersion: tls.VersionTLS12}
		if tc.CAFile != "" {
			pem, err := os.ReadFile(tc.CAFile)
			if err != nil {
				return nil, fmt.Errorf("remote: CA file: %w", err)
			}
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pem) {
				return nil, fmt.Errorf("remote: CA file %s holds no PEM certificate", tc.CAFile)
			}
			o.TLS.RootCAs = pool
		}
	} else if tc.CAFile != "" {
		return nil, errors.New("remote: a CA file needs valkeys:// (TLS)")
	}
	c, err := Dial(ctx, o)
	if err != nil {
		if errors.Is(err, ErrAuthFailed) {
			return nil, fmt.Errorf("remote: the cluster refused the credentials: %w", err)
		}
		return nil, fmt.Errorf("remote: cluster %s unreachable: %w", tc.URL, err)
	}
	if !tc.NoEvictOK {
		if err := c.CheckNoEviction(ctx); err != nil {
			c.Close()
			return nil, err
		}
	}
	s, err := NewStore(c, key)
	if err != nil {
		c.Close()
		return nil, err
	}
	t := &Tier{c: c, s: s, host: tc.Host, quota: tc.Quota, fresh: map[string]struct{}{}}
	t.up.Store(true)
	// One round trip proves the user may read and write our keys.
	if _, err := t.Used(ctx); err != nil {
		c.Close()
		return nil, fmt.Errorf("remote: the cluster answers but refuses our keys: %w", err)
	}
	return t, nil
}

// Close drops the connections.
func (t *Tier) Close() { t.c.Close() }

// Store is the sealed block store under the tier (export/import uses it).
func (t *Tier) Store() *Store { return t.s }

// Host is the name this host's blocks go under.
func (t *Tier) Host() string { return t.host }

func (t *Tier) usedKey() []byte { return []byte(t.s.HostPrefix(t.host) + "used") }

// Used reads the bytes this host keeps in the cluster (the quota counter).
func (t *Tier) Used(ctx context.Context) (uint64, error) {
	k := t.usedKey()
	r := t.c.Do(ctx, []Cmd{{Key: k, Args: [][]byte{[]byte("GET"), k}}})[0]
	if r.Err != nil {
		t.fail(r.Err)
		return 0, r.Err
	}
	if r.Val.Null {
		return 0, nil
	}
	n, err := strconv.ParseInt(string(r.Val.Str), 10, 64)
	if err != nil {
		return 0, protoErr("quota counter %q", trunc(r.Val.Str))
	}
	return uint64(max(n, 0)), nil
}

// charge adds delta to the quota counter and answers the new total.
func (t *Tier) charge(ctx context.Context, delta int64) (int64, error) {
	k := t.usedKey()
	r := t.c.Do(ctx, []Cmd{{Key: k, Args: [][]byte{[]byte("INCRBY"), k, []byte(strconv.FormatInt(delta, 10))}}})[0]
	if r.Err != nil {
		return 0, r.Err
	}
	return r.Val.Int, nil
}

func (t *Tier) fail(err error) {
	if err == nil || errors.Is(err, ErrQuota) || errors.Is(err, ErrMissing) || errors.Is(err, ErrCorrupt) || errors.Is(err, ErrStale) {
		return
	}
	t.up.Store(false)
	t.lastErr.Store(err.Error())
}

// Write stores packed blocks of a pool, pipelined per master, and answers
// per block: nil only once the block is on its master and a replica (where
// it has one). Until the caller has recorded a written block in its index
// and called Release, a sweep leaves it alone.
func (t *Tier) Write(ctx context.Context, pool string, blocks []Block) []error {
	ns := Namespace{Host: t.host, Pool: pool}
	var total int64
	for _, b := range blocks {
		total += int64(len(b.Data) + SealOverhead)
	}
	errs := make([]error, len(blocks))
	if t.quota > 0 {
		n, err := t.charge(ctx, total)
		if err != nil {
			t.fail(err)
			return fill(errs, fmt.Errorf("remote: quota counter: %w", err))
		}
		if uint64(n) > t.quota {
			t.charge(ctx, -total) // not written: give the room back
			t.st.quotaFull.Add(1)
			return fill(errs, fmt.Errorf("%w (%d of %d bytes)", ErrQuota, n-total, t.quota))
		}
	}
	t.freshMu.Lock()
	for _, b := range blocks {
		t.fresh[string(t.s.Key(ns, b.ID))] = struct{}{}
	}
	t.freshMu.Unlock()
	t0 := time.Now()
	errs = t.s.Put(ctx, ns, blocks)
	t.lat.add(time.Since(t0), true)
	var failed int64
	ok := true
	for i, err := range errs {
		if err != nil {
			t.st.writeErr.Add(1)
			t.fail(err)
			ok = false
			// A block the master took but no replica acknowledged is
			// still there: counted until the sweep removes it.
			if !errors.Is(err, ErrNotReplicated) {
				failed += int64(len(blocks[i].Data) + SealOverhead)
			}
			continue
		}
		t.st.blocksW.Add(1)
		t.st.bytesW.Add(uint64(len(blocks[i].Data)))
	}
	if ok {
		t.up.Store(true)
	}
	if failed > 0 && t.quota > 0 {
		t.charge(ctx, -failed)
	}
	return errs
}

func fill(errs []error, err error) []error {
	for i := range errs {
		errs[i] = err
	}
	return errs
}

// Release says the caller's index now names these blocks (or gave them
// up): the sweep may judge them again.
func (t *Tier) Release(pool string, ids []uint64) {
	ns := Namespace{Host: t.host, Pool: pool}
	t.freshMu.Lock()
	for _, id := range ids {
		delete(t.fresh, string(t.s.Key(ns, id)))
	}
	t.freshMu.Unlock()
}

// Read reads blocks of a pool back in one batch. Each is the block exactly
// as written, or an error (ErrMissing, ErrCorrupt, ErrStale, the
// cluster's): its pages must answer FAILED or CORRUPT, never other bytes.
func (t *Tier) Read(ctx context.Context, pool string, refs []Ref) ([][]byte, []error) {
	t0 := time.Now()
	data, errs := t.s.Get(ctx, Namespace{Host: t.host, Pool: pool}, refs)
	t.lat.add(time.Since(t0), false)
	ok := true
	for i, err := range errs {
		switch {
		case err == nil:
			t.st.blocksR.Add(1)
			t.st.bytesR.Add(uint64(len(data[i])))
			continue
		case errors.Is(err, ErrCorrupt):
			t.st.corrupt.Add(1)
		case errors.Is(err, ErrMissing):
			t.st.missing.Add(1)
		case errors.Is(err, ErrStale):
			t.st.stale.Add(1)
		default:
			ok = false
		}
		t.st.readErr.Add(1)
		t.fail(err)
	}
	if ok {
		t.up.Store(true)
	}
	return data, errs
}

// Delete removes blocks of a pool and gives their bytes (sizes[i], as
// written) back to the quota.
func (t *Tier) Delete(ctx context.Context, pool string, ids []uint64, sizes []int) error {
	errs := t.s.Delete(ctx, Namespace{Host: t.host, Pool: pool}, ids)
	var freed int64
	var first error
	for i, err := range errs {
		if err != nil {
			first = cmp(first, err)
			continue
		}
		t.st.deleted.Add(1)
		freed += int64(sizes[i] + SealOverhead)
	}
	if freed > 0 && t.quota > 0 {
		if _, err := t.charge(ctx, -freed); err != nil {
			first = cmp(first, err)
		}
	}
	t.fail(first)
	return first
}

func cmp(first, err error) error {
	if first != nil {
		return first
	}
	return err
}

// Sweep deletes this host's blocks that keep(key) says no index references
// (pools deleted, a crash between a write and its checkpoint), except
// those written and not yet released, and sets the quota counter to what
// remains. keep gets the store key, as Key makes it. A failover during the
// scan may hide keys: they are swept next time.
func (t *Tier) Sweep(ctx context.Context, keep func(key []byte) bool) (swept int, err error) {
	prefix := t.s.HostPrefix(t.host)
	used := string(t.usedKey())
	var doomed [][]byte
	var remain int64
	var live [][]byte
	err = t.c.Scan(ctx, prefix+"*", func(k []byte) error {
		if string(k) == used {
			return nil
		}
		t.freshMu.Lock()
		_, isFresh := t.fresh[string(k)]
		t.freshMu.Unlock()
		if isFresh || keep(k) {
			live = append(live, append([]byte(nil), k...))
		} else {
			doomed = append(doomed, append([]byte(nil), k...))
		}
		return nil
	})
	if err != nil {
		t.fail(err)
		return 0, err
	}
	cmds := make([]Cmd, 0, len(doomed)+len(live))
	for _, k := range doomed {
		cmds = append(cmds, Cmd{Key: k, Args: [][]byte{[]byte("DEL"), k}})
	}
	for _, k := range live {
		cmds = append(cmds, Cmd{Key: k, Args: [][]byte{[]byte("STRLEN"), k}})
	}
	for i, r := range t.c.Do(ctx, cmds) {
		if r.Err != nil {
			err = cmp(err, r.Err)
			continue
		}
		if i < len(doomed) {
			swept++
		} else {
			remain += r.Val.Int
		}
	}
	t.st.swept.Add(uint64(swept))
	if err == nil && t.quota > 0 {
		// Counted again from what is there: deletes lost in a failover
		// and writes never acknowledged stop holding room.
		k := t.usedKey()
		r := t.c.Do(ctx, []Cmd{{Key: k, Args: [][]byte{[]byte("SET"), k, []byte(strconv.FormatInt(remain, 10))}, Write: true}})[0]
		err = r.Err
	}
	t.fail(err)
	return swept, err
}

// Key is the store key of a block of pool, as Sweep's keep receives it.
func (t *Tier) Key(pool string, id uint64) []byte {
	return t.s.Key(Namespace{Host: t.host, Pool: pool}, id)
}

// KeyDown is the NodeDownError of the node that serves a block of pool,
// or nil while that node is up.
func (t *Tier) KeyDown(pool string, id uint64) error { return t.c.KeyDown(t.Key(pool, id)) }

// Ping tells whether the cluster answers now, and records it.
func (t *Tier) Ping(ctx context.Context) error {
	_, err := t.Used(ctx)
	if err == nil {
		t.up.Store(true)
	}
	return err
}

// TierStats is what STATS, /metrics and ctl stats show of the tier.
type TierStats struct {
	Up                              bool // the last call went through and no master is down
	Nodes                           []NodeState
	LastError                       string
	Host                            string
	Quota, Used                     uint64 // Used: the counter as last read (Stats reads it)
	BlocksWritten, BytesWritten     uint64
	BlocksRead, BytesRead           uint64
	WriteErrors, ReadErrors         uint64
	Corrupt, Missing, Stale         uint64
	Deleted, Swept, QuotaFull       uint64
	Moved, Ask, Retried             uint64
	LatencyBounds                   []time.Duration
	ReadLatency, WriteLatency       []uint64 // one more than the bounds
	ReadLatencySum, WriteLatencySum time.Duration
}

// Stats reads the counters, and the quota counter from the cluster when it
// answers within a short time.
func (t *Tier) Stats(ctx context.Context) TierStats {
	s := TierStats{Up: t.up.Load(), Host: t.host, Quota: t.quota,
		BlocksWritten: t.st.blocksW.Load(), BytesWritten: t.st.bytesW.Load(),
		BlocksRead: t.st.blocksR.Load(), BytesRead: t.st.bytesR.Load(),
		WriteErrors: t.st.writeErr.Load(), ReadErrors: t.st.readErr.Load(),
		Corrupt: t.st.corrupt.Load(), Missing: t.st.missing.Load(), Stale: t.st.stale.Load(),
		Deleted: t.st.deleted.Load(), Swept: t.st.swept.Load(), QuotaFull: t.st.quotaFull.Load()}
	if e, ok := t.lastErr.Load().(string); ok {
		s.LastError = e
	}
	s.Nodes = t.c.Nodes()
	for _, n := range s.Nodes {
		if n.Master && n.Down {
			s.Up = false
		}
	}
	cs := t.c.Stats()
	s.Moved, s.Ask, s.Retried = cs.Moved, cs.Ask, cs.Retried
	s.LatencyBounds = latBounds
	s.ReadLatency, s.ReadLatencySum = t.lat.snapshot(false)
	s.WriteLatency, s.WriteLatencySum = t.lat.snapshot(true)
	if t.c.KeyDown(t.usedKey()) == nil {
		ctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		if n, err := t.Used(ctx); err == nil {
			s.Used = n
		}
	}
	return s
}

// latBounds are the batch latency buckets: 100 us to ~1.6 s, doubling.
var latBounds = func() []time.Duration {
	var b []time.Duration
	for d := 100 * time.Microsecond; d <= 2*time.Second; d *= 2 {
		b = append(b, d)
	}
	return b
}()

// latHist counts read and write batches by latency.
type latHist struct {
	mu     sync.Mutex
	counts [2][]uint64
	sum    [2]time.Duration
}

func (h *latHist) add(d time.Duration, write bool) {
	w := 0
	if write {
		w = 1
	}
	i := 0
	for i < len(latBounds) && d > latBounds[i] {
		i++
	}
	h.mu.Lock()
	if h.counts[w] == nil {
		h.counts[w] = make([]uint64, len(latBounds)+1)
	}
	h.counts[w][i]++
	h.sum[w] += d
	h.mu.Unlock()
}

func (h *latHist) snapshot(write bool) ([]uint64, time.Duration) {
	w := 0
	if write {
		w = 1
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]uint64, len(latBounds)+1)
	copy(out, h.counts[w])
	return out, h.sum[w]
}
