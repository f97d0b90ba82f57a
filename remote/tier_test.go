package remote

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// secretFile writes a secret with mode 0600 and returns its path.
func secretFile(t *testing.T, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func tierConfig(t *testing.T, tc *testCluster) TierConfig {
	return TierConfig{URL: tc.URL(),
		CredFile: secretFile(t, "creds", []byte(testUser+"\n"+testPass+"\n")),
		KeyFile:  secretFile(t, "key", testKey), Host: "tier-" + t.Name(),
		Options: Options{RetryFor: 2 * time.Second}}
}

func openTier(t *testing.T, tc TierConfig) *Tier {
	t.Helper()
	tr, err := OpenTier(testCtx(t), tc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tr.Close)
	return tr
}

// Every reason the tier cannot work stops OpenTier, with that reason.
func TestOpenTierRefusals(t *testing.T) {
	tc := getCluster(t)
	good := tierConfig(t, tc)
	openTier(t, good)
	cases := []struct {
		name string
		edit func(c *TierConfig)
		want string
	}{
		{"wrong password", func(c *TierConfig) {
			c.CredFile = secretFile(t, "bad", []byte(testUser+"\nnot-the-password\n"))
		}, "refused the credentials"},
		{"no credentials (default user off)", func(c *TierConfig) { c.CredFile = "" }, "refused the credentials"},
		{"key missing", func(c *TierConfig) { c.KeyFile = "" }, "no encryption key"},
		{"key file absent", func(c *TierConfig) { c.KeyFile = filepath.Join(t.TempDir(), "none") }, "no such file"},
		{"key of the wrong size", func(c *TierConfig) { c.KeyFile = secretFile(t, "short", make([]byte, 16)) }, "want 32 raw bytes"},
		{"key others may read", func(c *TierConfig) {
			p := secretFile(t, "open", testKey)
			os.Chmod(p, 0o644)
			c.KeyFile = p
		}, "lets others read it"},
		{"unreachable", func(c *TierConfig) {
			ports, _ := freePorts(1) // closed again: nobody listens
			c.URL = "valkey://127.0.0.1:" + strconv.Itoa(ports[0])
		}, "unreachable"},
		{"credentials in the URL", func(c *TierConfig) { c.URL = "valkey://u:p@" + tc.addr(0) }, "no credentials in the URL"},
		{"CA file without TLS", func(c *TierConfig) { c.CAFile = "/etc/ssl/certs/ca-certificates.crt" }, "needs valkeys://"},
	}
	for _, k := range cases {
		c := good
		k.edit(&c)
		tr, err := OpenTier(testCtx(t), c)
		if err == nil {
			tr.Close()
			t.Errorf("%s: the tier opened", k.name)
			continue
		}
		if !strings.Contains(err.Error(), k.want) {
			t.Errorf("%s: %v, want it to say %q", k.name, err, k.want)
		}
	}

	// An evicting node: refused, unless the operator states otherwise.
	if _, err := tc.nodeDo(2, "CONFIG", "SET", "maxmemory-policy", "volatile-lru"); err != nil {
		t.Fatal(err)
	}
	defer tc.nodeDo(2, "CONFIG", "SET", "maxmemory-policy", "noeviction")
	if _, err := OpenTier(testCtx(t), good); err == nil || !strings.Contains(err.Error(), "volatile-lru") {
		t.Errorf("evicting node: %v", err)
	}
	stated := good
	stated.NoEvictOK = true
	openTier(t, stated)
}

func packed(rng *rand.Rand, n, pages int) ([]Block, [][][]byte) {
	bs := make([]Block, n)
	objs := make([][][]byte, n)
	for i := range bs {
		keys := make([]uint64, pages)
		objs[i] = make([][]byte, pages)
		for j := range keys {
			keys[j] = uint64(i*pages + j)
			objs[i][j] = make([]byte, 100+rng.IntN(3000))
			for k := range objs[i][j] {
				objs[i][j][k] = byte(rng.Uint32())
			}
		}
		bs[i] = Block{ID: uint64(i + 1), Gen: 7, Data: Pack(nil, keys, objs[i])}
	}
	return bs, objs
}

// Packed blocks go in and come back, object for object; the quota counts
// them and refuses what does not fit; a tampered block answers
// ErrCorrupt; the sweep removes only what no index names.
func TestTierRoundTripQuotaSweep(t *testing.T) {
	tc := getCluster(t)
	cfg := tierConfig(t, tc)
	cfg.Quota = 1 << 20
	tr := openTier(t, cfg)
	ctx := testCtx(t)
	// Start from nothing: an earlier run's blocks under this host go.
	if _, err := tr.Sweep(ctx, func([]byte) bool { return false }); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	bs, objs := packed(rng, 20, 8)
	for i, err := range tr.Write(ctx, "p", bs) {
		if err != nil {
			t.Fatalf("block %d: %v", i, err)
		}
	}
	var want uint64
	for _, b := range bs {
		want += uint64(len(b.Data) + SealOverhead)
	}
	if used, err := tr.Used(ctx); err != nil || used != want {
		t.Fatalf("used %d, %v; want %d", used, err, want)
	}
	refs := make([]Ref, len(bs))
	for i, b := range bs {
		refs[i] = Ref{ID: b.ID, Gen: b.Gen}
	}
	data, errs := tr.Read(ctx, "p", refs)
	for i := range bs {
		if errs[i] != nil {
			t.Fatalf("block %d: %v", i, errs[i])
		}
		_, got, err := Unpack(data[i])
		if err != nil {
			t.Fatal(err)
		}
		for j := range got {
			if !bytes.Equal(got[j], objs[i][j]) {
				t.Fatalf("block %d object %d differs", i, j)
			}
		}
	}

	// Past the quota: refused whole, nothing charged.
	big := []Block{{ID: 100, Gen: 1, Data: make([]byte, 1<<20)}}
	if err := tr.Write(ctx, "p", big)[0]; !errors.Is(err, ErrQuota) {
		t.Fatalf("write past the quota: %v", err)
	}
	if used, _ := tr.Used(ctx); used != want {
		t.Fatalf("a refused write left used at %d, want %d", used, want)
	}

	// Tampered in the cluster: a flipped byte fails authentication.
	k := tr.Key("p", 3)
	raw := tr.c.Do(ctx, []Cmd{{Key: k, Args: [][]byte{[]byte("GET"), k}}})[0].Val.Str
	raw[len(raw)/2] ^= 1
	tr.c.Do(ctx, []Cmd{{Key: k, Args: [][]byte{[]byte("SET"), k, raw}}})
	_, errs = tr.Read(ctx, "p", refs[2:3])
	if !errors.Is(errs[0], ErrCorrupt) {
		t.Fatalf("tampered block: %v", errs[0])
	}

	// The index names the even blocks; fresh ones are spared until released.
	keep := func(key []byte) bool {
		for _, b := range bs {
			if b.ID%2 == 0 && bytes.Equal(key, tr.Key("p", b.ID)) {
				return true
			}
		}
		return false
	}
	if n, err := tr.Sweep(ctx, keep); err != nil || n != 0 {
		t.Fatalf("sweep of fresh blocks removed %d: %v", n, err)
	}
	ids := make([]uint64, len(bs))
	for i, b := range bs {
		ids[i] = b.ID
	}
	tr.Release("p", ids)
	if n, err := tr.Sweep(ctx, keep); err != nil || n != 10 {
		t.Fatalf("sweep removed %d, want 10: %v", n, err)
	}
	_, errs = tr.Read(ctx, "p", refs)
	for i, b := range bs {
		if b.ID%2 == 0 && errs[i] != nil {
			t.Errorf("kept block %d: %v", b.ID, errs[i])
		}
		if b.ID%2 == 1 && !errors.Is(errs[i], ErrMissing) {
			t.Errorf("swept block %d: %v", b.ID, errs[i])
		}
	}
	var rest uint64
	for _, b := range bs {
		if b.ID%2 == 0 {
			rest += uint64(len(b.Data) + SealOverhead)
		}
	}
	if used, _ := tr.Used(ctx); used != rest {
		t.Fatalf("after the sweep used %d, want %d", used, rest)
	}
	st := tr.Stats(ctx)
	if !st.Up || st.BlocksWritten != 20 || st.Corrupt != 1 || st.Swept != 10 || st.QuotaFull != 1 || st.Used != rest {
		t.Fatalf("stats %+v", st)
	}
}

// A block of garbage never unpacks into objects.
func TestUnpackRefuses(t *testing.T) {
	b := Pack(nil, []uint64{1, 2}, [][]byte{[]byte("ab"), []byte("cde")})
	if _, o, err := Unpack(b); err != nil || string(o[1]) != "cde" {
		t.Fatal(o, err)
	}
	for _, bad := range [][]byte{nil, b[:3], b[:len(b)-1], append(b, 0), {0xff, 0xff, 0, 0}} {
		if _, _, err := Unpack(bad); err == nil {
			t.Errorf("%x unpacked", bad)
		}
	}
}
