package tests

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	osuser "os/user"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/s4d-project/s4d/backends/corpus"
	"github.com/s4d-project/s4d/ipc"
	"github.com/s4d-project/s4d/remote"
	"github.com/s4d-project/s4d/remote/valkeytest"
)

// The remote tier (issue 32) against a real 3+3 Valkey cluster started
// here (remote/valkeytest; make deps-remote installs valkey).

func valkeyCluster(t testing.TB) *valkeytest.Cluster {
	t.Helper()
	if _, _, err := valkeytest.Binaries(); err != nil {
		t.Skip(err)
	}
	vc, err := valkeytest.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(vc.Stop)
	return vc
}

func secret(t testing.TB, dir, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// remoteArgs are a daemon's remote-tier flags: the cluster, credentials
// and key from files.
func remoteArgs(t testing.TB, vc *valkeytest.Cluster, key []byte, host string) []string {
	dir := t.TempDir()
	return []string{"--remote-tier", vc.URL(), "--remote-host", host,
		"--remote-credentials", secret(t, dir, "creds", []byte(valkeytest.User+"\n"+valkeytest.Pass+"\n")),
		"--remote-key-file", secret(t, dir, "key", key)}
}

// startFails runs a daemon that must refuse to start, and returns what it
// said.
func startFails(t *testing.T, args ...string) string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "s4d.sock")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, s4dBin, append([]string{"daemon", "--socket", sock}, args...)...).CombinedOutput()
	if err == nil || ctx.Err() != nil {
		t.Fatalf("daemon %v: started or hung (%v)\n%s", args, err, out)
	}
	return string(out)
}

func flagSet(args []string, name, value string) []string {
	out := append([]string(nil), args...)
	for i := range out {
		if out[i] == name {
			out[i+1] = value
		}
	}
	return out
}

func TestRemoteTier(t *testing.T) {
	vc := valkeyCluster(t)
	key := bytes.Repeat([]byte{0x5a}, remote.KeySize)

	t.Run("refusals", func(t *testing.T) {
		good := remoteArgs(t, vc, key, "a")
		dir := t.TempDir()
		cases := []struct {
			name string
			args []string
			want string
		}{
			{"wrong password", flagSet(good, "--remote-credentials", secret(t, dir, "bad", []byte(valkeytest.User+"\nwrong\n"))), "refused the credentials"},
			{"key missing", flagSet(good, "--remote-key-file", filepath.Join(dir, "absent")), "no such file"},
			{"key wrong size", flagSet(good, "--remote-key-file", secret(t, dir, "short", key[:20])), "want 32 raw bytes"},
			{"unreachable", flagSet(good, "--remote-tier", "valkey://127.0.0.1:1"), "unreachable"},
			{"credentials in the URL", flagSet(good, "--remote-tier", "valkey://u:p@"+vc.Addr(0)), "no credentials in the URL"},
		}
		for _, c := range cases {
			if out := startFails(t, c.args...); !strings.Contains(out, c.want) {
				t.Errorf("%s: want %q in\n%s", c.name, c.want, out)
			}
		}
		// No key at all: refused, unless a systemd credential gives one.
		noKey := append([]string(nil), good[:len(good)-2]...)
		if out := startFails(t, noKey...); !strings.Contains(out, "no encryption key") {
			t.Errorf("no key: %s", out)
		}
		// An evicting node: refused with the reason, unless stated.
		if _, err := vc.CLIDo(1, "CONFIG", "SET", "maxmemory-policy", "allkeys-lru"); err != nil {
			t.Fatal(err)
		}
		out := startFails(t, good...)
		vc.CLIDo(1, "CONFIG", "SET", "maxmemory-policy", "noeviction")
		if !strings.Contains(out, "allkeys-lru") || !strings.Contains(out, "noeviction") {
			t.Errorf("evicting node: %s", out)
		}
	})

	t.Run("export-import", func(t *testing.T) {
		a := start(t, remoteArgs(t, vc, key, "host-a")...)
		b := start(t, remoteArgs(t, vc, key, "host-b")...)
		// 3000 pages of every kind: 12 blocks.
		const n = 3000
		var pages []byte
		for i, k := range corpus.Kinds {
			pages = append(pages, corpus.Pages(k, n/len(corpus.Kinds)+1, 4096, uint64(i))...)
		}
		pages = pages[:n*4096]
		ks := keys(1000, n)
		ca := a.client()
		for lo := 0; lo < n; lo += 500 {
			codes, err := ca.Put(ctx(t), "job", ks[lo:lo+500], pages[lo*4096:(lo+500)*4096])
			if err != nil {
				t.Fatal(err)
			}
			allOK(t, "put", ks[lo:lo+500], codes)
		}
		if out := a.mustCtl("pool", "export", "job"); !strings.Contains(out, "exported pool job") || !strings.Contains(out, "3000 pages in 12 blocks") {
			t.Fatalf("export: %s", out)
		}
		if out := b.mustCtl("pool", "import", "job"); !strings.Contains(out, "3000 pages in 12 blocks") {
			t.Fatalf("import: %s", out)
		}
		cb := b.client()
		for lo := 0; lo < n; lo += 500 {
			got, codes, err := cb.Get(ctx(t), "job", ks[lo:lo+500])
			if err != nil {
				t.Fatal(err)
			}
			allOK(t, "get", ks[lo:lo+500], codes)
			if !bytes.Equal(got, pages[lo*4096:(lo+500)*4096]) {
				t.Fatalf("pages %d-%d differ after the move", lo, lo+500)
			}
		}
		if out := b.mustCtl("stats"); !strings.Contains(out, "remote tier valkey://") || !strings.Contains(out, ": up,") {
			t.Errorf("stats: %s", out)
		}

		// Another key: the export is not found (its names differ).
		other := start(t, remoteArgs(t, vc, bytes.Repeat([]byte{1}, remote.KeySize), "host-c")...)
		if out, err := other.ctl("pool", "import", "job"); err == nil || !strings.Contains(out, "no export of pool job") {
			t.Fatalf("import with another key: %v %s", err, out)
		}

		// A tampered block: the import fails, and no page of it is stored.
		c, err := remote.Dial(ctx(t), remote.Options{Addrs: []string{vc.Addr(0)}, User: valkeytest.User, Password: valkeytest.Pass})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		s, err := remote.NewStore(c, key)
		if err != nil {
			t.Fatal(err)
		}
		me, err := osuser.Current()
		if err != nil {
			t.Fatal(err)
		}
		k := s.Key(remote.Namespace{Host: "\x00export", Pool: me.Username + "/job"}, 5)
		got := c.Do(ctx(t), []remote.Cmd{{Key: k, Args: [][]byte{[]byte("GET"), k}}})[0]
		if got.Err != nil || got.Val.Null {
			t.Fatalf("block 5 of the export: %v null=%v", got.Err, got.Val.Null)
		}
		raw := got.Val.Str
		raw[len(raw)-100] ^= 0x40
		if r := c.Do(ctx(t), []remote.Cmd{{Key: k, Args: [][]byte{[]byte("SET"), k, raw}}})[0]; r.Err != nil {
			t.Fatal(r.Err)
		}
		d := start(t, remoteArgs(t, vc, key, "host-d")...)
		if out, err := d.ctl("pool", "import", "job"); err == nil || !strings.Contains(out, "failed authentication") {
			t.Fatalf("import of a tampered export: %v %s", err, out)
		}
		// The round with block 5 was refused whole: none of its pages.
		_, codes, err := d.client().Get(ctx(t), "job", ks[4*256:5*256])
		if err == nil {
			for i, code := range codes {
				if code == ipc.OK {
					t.Fatalf("page %d of the tampered round was stored", ks[4*256+i])
				}
			}
		}
	})
}

// Below the backing file: a pool larger than the memory limit plus the
// file goes in, spills to the cluster, and comes back byte for byte; again
// after a restart with persist; and after a master is killed while pages
// are written and read (every page comes back once the cluster has failed
// over, since none left the file before a replica had it).
func TestRemoteColdTier(t *testing.T) {
	vc := valkeyCluster(t)
	key := bytes.Repeat([]byte{0x33}, remote.KeySize)
	path := backingFile(t, 8<<20)
	args := append([]string{"--mem-limit", "4M", "--backing-file", path, "--persist", "true", "--checkpoint-interval", "0"},
		remoteArgs(t, vc, key, "cold-host")...)
	d := start(t, args...)
	pages := corpus.Pages(corpus.Mixed, (48<<20)/4096, 4096, 21)
	putParallel(t, d, "big", pages, 2)
	st := statsOf(t, d)
	if st.IO.NoSpace != 0 || st.Remote == nil || st.Remote.Pages == 0 || st.Remote.PagesSpilled == 0 || !st.Remote.Up {
		t.Fatalf("no space %d, remote %+v", st.IO.NoSpace, st.Remote)
	}
	checkPages(t, d, "big", pages)
	st = statsOf(t, d)
	if st.Remote.BlocksRead == 0 || st.Remote.ReadErrors != 0 {
		t.Fatalf("remote after the GETs: %+v", st.Remote)
	}
	if out := d.mustCtl("stats"); !strings.Contains(out, "below the backing file:") {
		t.Errorf("ctl stats:\n%s", out)
	}
	t.Logf("%d pages in the cluster in %d blocks, %d spilled in %d rounds; %d blocks read",
		st.Remote.Pages, st.Remote.Blocks, st.Remote.PagesSpilled, st.Remote.Spills, st.Remote.BlocksRead)

	// A planned restart: the file's checkpoint names the cluster's pages.
	d.stop()
	d = startOn(t, d.socket, args...)
	checkPages(t, d, "big", pages)

	// A master killed while another pool is written and the first read.
	more := corpus.Pages(corpus.Text, (16<<20)/4096, 4096, 22)
	done := make(chan struct{})
	go func() {
		defer close(done)
		putParallel(t, d, "more", more, 1)
	}()
	vc.Kill(0)
	<-done
	// Until the dead master's replica serves its slots, its pages fail
	// at once (issue 43): wait until the daemon's slot map has it no more.
	err := valkeytest.WaitFor(30*time.Second, func() error {
		st := statsOf(t, d)
		if !st.Remote.Up {
			return errors.New("cluster down")
		}
		for _, n := range st.Remote.Nodes {
			if n.Addr == vc.Addr(0) && n.Role == "master" {
				return errors.New("the killed master still serves slots")
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	checkPages(t, d, "big", pages)
	checkPages(t, d, "more", more)

	// A block changed in the cluster: its pages answer failed or corrupt,
	// every other page comes back as it was, none as other bytes.
	c, err := remote.Dial(ctx(t), remote.Options{Addrs: []string{vc.Addr(1)}, User: valkeytest.User, Password: valkeytest.Pass})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s, err := remote.NewStore(c, key)
	if err != nil {
		t.Fatal(err)
	}
	// Every block of this host is changed: which block holds which pool's
	// pages is the daemon's business (one picked alone may hold only pages
	// of "more", or none still referenced), and every one must fail alike.
	var victims [][]byte
	c.Scan(ctx(t), s.HostPrefix("cold-host")+"*", func(k []byte) error {
		if !bytes.HasSuffix(k, []byte(":used")) {
			victims = append(victims, append([]byte(nil), k...))
		}
		return nil
	})
	if len(victims) == 0 {
		t.Fatal("no block of cold-host in the cluster")
	}
	for _, victim := range victims {
		got := c.Do(ctx(t), []remote.Cmd{{Key: victim, Args: [][]byte{[]byte("GET"), victim}}})[0]
		raw := got.Val.Str
		if got.Err != nil || len(raw) == 0 {
			continue // swept meanwhile
		}
		raw[len(raw)/2] ^= 0x10
		if r := c.Do(ctx(t), []remote.Cmd{{Key: victim, Args: [][]byte{[]byte("SET"), victim, raw}}})[0]; r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	cl := d.client()
	bad := 0
	for _, pool := range []struct {
		name  string
		pages []byte
	}{{"big", pages}, {"more", more}} {
		n := len(pool.pages) / 4096
		for lo := 0; lo < n; lo += 1024 {
			ks := keys(uint64(lo), min(1024, n-lo))
			data, codes, err := cl.Get(ctx(t), pool.name, ks)
			if err != nil {
				t.Fatal(err)
			}
			for i, code := range codes {
				switch code {
				case ipc.OK:
					if !bytes.Equal(data[i*4096:(i+1)*4096], pool.pages[(lo+i)*4096:(lo+i+1)*4096]) {
						t.Fatalf("%s page %d answered OK with other bytes", pool.name, lo+i)
					}
				case ipc.CodeFailed, ipc.CodeCorrupt:
					bad++
				default:
					t.Fatalf("%s page %d: code %d", pool.name, lo+i, code)
				}
			}
		}
	}
	if bad == 0 {
		t.Fatalf("%d blocks changed, and no page failed", len(victims))
	}
	t.Logf("%d blocks changed: %d pages failed, the rest came back", len(victims), bad)

	// The whole cluster frozen: stats say it is down, pages in RAM are
	// served; thawed, it is up again.
	hot := corpus.Pages(corpus.Text, 16, 4096, 23)
	codes, err := cl.Put(ctx(t), "hot", keys(0, 16), hot)
	if err != nil {
		t.Fatal(err)
	}
	allOK(t, "put hot", keys(0, 16), codes)
	for i := range valkeytest.Nodes {
		vc.Signal(i, syscall.SIGSTOP)
	}
	if st := statsOf(t, d); st.Remote.Up {
		t.Fatalf("cluster frozen, stats say up: %+v", st.Remote)
	}
	if out := d.mustCtl("stats"); !strings.Contains(out, "DOWN") {
		t.Errorf("ctl stats with the cluster frozen:\n%s", out)
	}
	checkPages(t, d, "hot", hot)
	for i := range valkeytest.Nodes {
		vc.Signal(i, syscall.SIGCONT)
	}
	if err := valkeytest.WaitFor(30*time.Second, func() error {
		if !statsOf(t, d).Remote.Up {
			return errors.New("still down")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}
