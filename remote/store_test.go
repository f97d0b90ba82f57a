package remote

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

var testKey = bytes.Repeat([]byte{7}, KeySize)

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func newTestStore(t testing.TB, tc *testCluster, key []byte, edit func(*Options)) *Store {
	t.Helper()
	o := tc.opts()
	if edit != nil {
		edit(&o)
	}
	c, err := Dial(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	s, err := NewStore(c, key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func randBlocks(n, size int, gen uint64) []Block {
	bs := make([]Block, n)
	for i := range bs {
		sz := size
		if size > 1 { // varied sizes, empty blocks included
			j, _ := rand.Int(rand.Reader, big.NewInt(int64(size)))
			sz = int(j.Int64())
		}
		bs[i] = Block{ID: uint64(i), Gen: gen, Data: make([]byte, sz)}
		rand.Read(bs[i].Data)
	}
	return bs
}

func refs(bs []Block) []Ref {
	r := make([]Ref, len(bs))
	for i, b := range bs {
		r[i] = Ref{b.ID, b.Gen}
	}
	return r
}

func mustPut(t testing.TB, s *Store, ns Namespace, bs []Block) {
	t.Helper()
	for i, err := range s.Put(context.Background(), ns, bs) {
		if err != nil {
			t.Fatalf("put %d: %v", i, err)
		}
	}
}

func checkGet(t testing.TB, s *Store, ns Namespace, bs []Block) {
	t.Helper()
	data, errs := s.Get(context.Background(), ns, refs(bs))
	for i, b := range bs {
		if errs[i] != nil {
			t.Fatalf("get %d: %v", b.ID, errs[i])
		}
		if !bytes.Equal(data[i], b.Data) {
			t.Fatalf("block %d: %d bytes back, %d written, or different bytes", b.ID, len(data[i]), len(b.Data))
		}
	}
}

// wantErr checks every error of errs is target.
func wantErr(t *testing.T, what string, errs []error, target error) {
	t.Helper()
	for i, err := range errs {
		if !errors.Is(err, target) {
			t.Fatalf("%s: block %d: err %v, want %v", what, i, err, target)
		}
	}
}

func TestStoreRoundTrip(t *testing.T) {
	tc := getCluster(t)
	s := newTestStore(t, tc, testKey, nil)
	ns := Namespace{"host-a", "pool-1"}
	bs := randBlocks(300, 64<<10, 1)
	mustPut(t, s, ns, bs)
	checkGet(t, s, ns, bs)

	// The blocks landed on every master, and their keys reveal neither
	// the host, the pool nor the data.
	seen := map[string]bool{}
	for _, b := range bs {
		k := s.Key(ns, b.ID)
		a, _ := s.c.route(k)
		seen[a] = true
		if bytes.Contains(k, []byte("host-a")) || bytes.Contains(k, []byte("pool-1")) {
			t.Fatalf("key %s names host or pool", k)
		}
	}
	if len(seen) != 3 {
		t.Fatalf("blocks on %d masters, want 3", len(seen))
	}
	// Every acknowledged write is on a replica already (WAIT): read one
	// back from each master's replica.
	for _, b := range bs[:20] {
		k := s.Key(ns, b.ID)
		a, _ := s.c.route(k)
		s.c.mu.RLock()
		rep := s.c.shards[a].replicas[0]
		s.c.mu.RUnlock()
		o := tc.opts().withDefaults()
		cn, err := dial(context.Background(), rep, &o)
		if err != nil {
			t.Fatal(err)
		}
		vs, err := cn.pipeline(context.Background(), [][][]byte{args("READONLY"), {[]byte("GET"), k}})
		cn.close()
		if err != nil || vs[1].Null {
			t.Fatalf("block %d not on replica %s: %v", b.ID, rep, err)
		}
	}

	// Another pool of the same host has its own keys.
	other := Namespace{"host-a", "pool-2"}
	_, errs := s.Get(testCtx(t), other, refs(bs[:5]))
	wantErr(t, "other pool", errs, ErrMissing)

	// Delete, then the blocks are missing, not zeros.
	ids := []uint64{0, 1, 2}
	for _, err := range s.Delete(testCtx(t), ns, ids) {
		if err != nil {
			t.Fatal(err)
		}
	}
	_, errs = s.Get(testCtx(t), ns, refs(bs[:3]))
	wantErr(t, "deleted", errs, ErrMissing)
	checkGet(t, s, ns, bs[3:])

	// RESP2 reads the same blocks.
	s2 := newTestStore(t, tc, testKey, func(o *Options) { o.RESP2 = true })
	checkGet(t, s2, ns, bs[3:])

	// A block over the limit is refused, the others of the batch go in.
	s.MaxBlock = 1000
	errs = s.Put(testCtx(t), ns, []Block{{ID: 900, Data: make([]byte, 1001)}, {ID: 901, Data: []byte("x")}})
	if errs[0] == nil || errs[1] != nil {
		t.Fatalf("over-limit block: %v", errs)
	}
}

func TestStoreAuthenticity(t *testing.T) {
	tc := getCluster(t)
	s := newTestStore(t, tc, testKey, nil)
	ns := Namespace{"host-b", "pool"}
	bs := randBlocks(8, 4096, 5)
	mustPut(t, s, ns, bs)

	// A wrong key names other store keys: missing.
	wrong := bytes.Repeat([]byte{8}, KeySize)
	sw := newTestStore(t, tc, wrong, nil)
	_, errs := sw.Get(testCtx(t), ns, refs(bs))
	wantErr(t, "wrong key", errs, ErrMissing)
	// The same names but another block key: authentication fails.
	sw.nameKey = s.nameKey
	_, errs = sw.Get(testCtx(t), ns, refs(bs))
	wantErr(t, "wrong block key", errs, ErrCorrupt)

	// Stale: the index expects another generation.
	r := refs(bs)
	for i := range r {
		r[i].Gen = 4
	}
	_, errs = s.Get(testCtx(t), ns, r)
	wantErr(t, "stale", errs, ErrStale)

	raw := func(id uint64) []byte {
		k := s.Key(ns, id)
		rp := s.c.Do(testCtx(t), []Cmd{{Key: k, Args: [][]byte{[]byte("GET"), k}}})[0]
		if rp.Err != nil {
			t.Fatal(rp.Err)
		}
		return rp.Val.Str
	}
	set := func(id uint64, v []byte) {
		k := s.Key(ns, id)
		if rp := s.c.Do(testCtx(t), []Cmd{{Key: k, Args: [][]byte{[]byte("SET"), k, v}, Write: true}})[0]; rp.Err != nil {
			t.Fatal(rp.Err)
		}
	}
	// Tampering anywhere (magic, generation, nonce, ciphertext, tag) or
	// truncating fails authentication.
	orig := raw(0)
	for _, off := range []int{0, 5, 11, 12, 23, headerSize, len(orig) / 2, len(orig) - 1} {
		v := bytes.Clone(orig)
		v[off] ^= 0x40
		set(0, v)
		_, errs := s.Get(testCtx(t), ns, refs(bs[:1]))
		wantErr(t, fmt.Sprintf("byte %d flipped", off), errs, ErrCorrupt)
	}
	for _, n := range []int{0, 3, SealOverhead - 1, len(orig) - 1} {
		set(0, orig[:n])
		_, errs := s.Get(testCtx(t), ns, refs(bs[:1]))
		wantErr(t, fmt.Sprintf("truncated to %d", n), errs, ErrCorrupt)
	}
	set(0, orig)
	checkGet(t, s, ns, bs[:1])

	// A block copied under another block's key fails: the key is bound.
	set(1, raw(2))
	_, errs = s.Get(testCtx(t), ns, refs(bs[1:3]))
	if !errors.Is(errs[0], ErrCorrupt) || errs[1] != nil {
		t.Fatalf("moved block: %v", errs)
	}
	// ...and so does one copied to another pool under the same ID.
	other := Namespace{"host-b", "other"}
	k := s.Key(other, 3)
	s.c.Do(testCtx(t), []Cmd{{Key: k, Args: [][]byte{[]byte("SET"), k, raw(3)}}})
	_, errs = s.Get(testCtx(t), other, refs(bs[3:4]))
	wantErr(t, "block from another pool", errs, ErrCorrupt)
	// A value of another type answers an error, not data.
	k = s.Key(ns, 4)
	s.c.Do(testCtx(t), []Cmd{{Key: k, Args: [][]byte{[]byte("DEL"), k}}, {Key: k, Args: [][]byte{[]byte("LPUSH"), k, []byte("x")}}})
	_, errs = s.Get(testCtx(t), ns, refs(bs[4:5]))
	if errs[0] == nil {
		t.Fatal("a list read as a block")
	}
}

func TestAuthFailure(t *testing.T) {
	tc := getCluster(t)
	for _, o := range []func(*Options){
		func(o *Options) { o.Password = "wrong" },
		func(o *Options) { o.User = "nobody" },
		func(o *Options) { o.User, o.Password = "", "" }, // default user is off
		func(o *Options) { o.Password = "wrong"; o.RESP2 = true },
	} {
		opt := tc.opts()
		o(&opt)
		start := time.Now()
		c, err := Dial(testCtx(t), opt)
		if err == nil {
			c.Close()
			t.Fatalf("%+v: connected", opt)
		}
		if opt.Password != "" && !errors.Is(err, ErrAuthFailed) {
			t.Fatalf("wrong password: %v, want ErrAuthFailed", err)
		}
		if time.Since(start) > 5*time.Second {
			t.Fatalf("refusal took %v: retried what cannot succeed", time.Since(start))
		}
	}
	// The right credentials, from a file.
	p := filepath.Join(t.TempDir(), "cred")
	os.WriteFile(p, []byte(testUser+"\n"+testPass+"\n"), 0o600)
	u, pw, err := ReadCredentials(p)
	if err != nil {
		t.Fatal(err)
	}
	opt := tc.opts()
	opt.User, opt.Password = u, pw
	c, err := Dial(testCtx(t), opt)
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
}

func TestNoEvictionCheck(t *testing.T) {
	tc := getCluster(t)
	s := newTestStore(t, tc, testKey, nil)
	if err := s.c.CheckNoEviction(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	if _, err := tc.nodeDo(4, "CONFIG", "SET", "maxmemory-policy", "allkeys-lru"); err != nil {
		t.Fatal(err)
	}
	err := s.c.CheckNoEviction(testCtx(t))
	tc.nodeDo(4, "CONFIG", "SET", "maxmemory-policy", "noeviction")
	if err == nil || !strings.Contains(err.Error(), "allkeys-lru") || !strings.Contains(err.Error(), tc.addr(4)) {
		t.Fatalf("allkeys-lru on node 4: %v", err)
	}
	// A user that may not read the configuration is told what to do.
	for i := range nodes {
		if _, err := tc.nodeDo(i, "ACL", "SETUSER", "noconf", "on", ">pw", "~*", "+@all", "-config"); err != nil {
			t.Fatal(err)
		}
		defer tc.nodeDo(i, "ACL", "DELUSER", "noconf")
	}
	c, err := Dial(testCtx(t), Options{Addrs: []string{tc.addr(0)}, User: "noconf", Password: "pw"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.CheckNoEviction(testCtx(t)); err == nil || !strings.Contains(err.Error(), "state the policy") {
		t.Fatalf("user without CONFIG: %v", err)
	}
}

// A write no replica acknowledges in time does not count: its replica is
// stopped (SIGSTOP), so WAIT answers 0, and the blocks of that master come
// back ErrNotReplicated while the rest of the batch is written.
func TestNotReplicated(t *testing.T) {
	tc := getCluster(t)
	s := newTestStore(t, tc, testKey, func(o *Options) { o.WaitTimeout = 300 * time.Millisecond })
	ns := Namespace{"host-c", "pool"}
	bs := randBlocks(60, 1024, 1)
	master, _ := s.c.route(s.Key(ns, 0))
	s.c.mu.RLock()
	rep := tc.index(s.c.shards[master].replicas[0])
	s.c.mu.RUnlock()
	tc.signal(rep, syscall.SIGSTOP)
	errs := s.Put(testCtx(t), ns, bs)
	tc.signal(rep, syscall.SIGCONT)
	var on, off int
	for i, b := range bs {
		a, _ := s.c.route(s.Key(ns, b.ID))
		if a == master {
			on++
			if !errors.Is(errs[i], ErrNotReplicated) {
				t.Fatalf("block %d on the master whose replica is stopped: %v", b.ID, errs[i])
			}
		} else if off++; errs[i] != nil {
			t.Fatalf("block %d on another master: %v", b.ID, errs[i])
		}
	}
	if on == 0 || off == 0 {
		t.Fatalf("%d blocks on the stopped replica's master, %d elsewhere", on, off)
	}
	if err := tc.waitHealthy(15 * time.Second); err != nil {
		t.Fatal(err)
	}
	mustPut(t, s, ns, bs)
	checkGet(t, s, ns, bs)
}
