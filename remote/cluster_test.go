package remote

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// A real cluster on loopback ports: three masters, three replicas, an ACL
// user with a password and the default user off, noeviction, and a short
// cluster-node-timeout so a failover takes a few seconds. One cluster is
// shared by the package's tests and benchmarks; TestMain kills it.

const (
	testUser = "s4d"
	testPass = "test-pass-0123"
	nodes    = 6
)

type testCluster struct {
	dir    string
	server string // valkey-server or redis-server
	ports  []int
	mu     sync.Mutex
	procs  []*exec.Cmd
}

var (
	clusterOnce sync.Once
	shared      *testCluster
	sharedErr   error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if shared != nil {
		shared.stop()
	}
	os.Exit(code)
}

// binaries finds valkey-server/valkey-cli, or Redis 7's pair.
func binaries() (server, cli string, err error) {
	for _, p := range [][2]string{{"valkey-server", "valkey-cli"}, {"redis-server", "redis-cli"}} {
		s, e1 := exec.LookPath(p[0])
		c, e2 := exec.LookPath(p[1])
		if e1 == nil && e2 == nil {
			return s, c, nil
		}
	}
	return "", "", fmt.Errorf("neither valkey-server/valkey-cli nor redis-server/redis-cli in PATH (make deps-remote installs them)")
}

func getCluster(tb testing.TB) *testCluster {
	tb.Helper()
	if _, _, err := binaries(); err != nil {
		tb.Skip(err)
	}
	clusterOnce.Do(func() { shared, sharedErr = startCluster() })
	if sharedErr != nil {
		tb.Fatal(sharedErr)
	}
	return shared
}

func (tc *testCluster) addr(i int) string { return "127.0.0.1:" + strconv.Itoa(tc.ports[i]) }

func (tc *testCluster) opts() Options {
	return Options{Addrs: []string{tc.addr(0), tc.addr(3)}, User: testUser, Password: testPass}
}

// freePorts holds every listener open until all are chosen, so the 12
// ports (client and cluster bus) differ.
func freePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

func startCluster() (*testCluster, error) {
	server, cli, _ := binaries()
	dir, err := os.MkdirTemp("", "s4d-valkey-")
	if err != nil {
		return nil, err
	}
	ports, err := freePorts(2 * nodes)
	if err != nil {
		return nil, err
	}
	tc := &testCluster{dir: dir, server: server, ports: ports[:nodes], procs: make([]*exec.Cmd, nodes)}
	for i := range nodes {
		nd := filepath.Join(dir, strconv.Itoa(i))
		if err := os.MkdirAll(nd, 0o700); err != nil {
			return tc, err
		}
		conf := fmt.Sprintf(`port %d
bind 127.0.0.1
cluster-enabled yes
cluster-port %d
cluster-config-file nodes.conf
cluster-node-timeout 1000
cluster-replica-validity-factor 0
dir %s
logfile %s/log
save ""
appendonly no
repl-diskless-sync yes
repl-diskless-sync-delay 0
maxmemory 512mb
maxmemory-policy noeviction
user default off
user %s on >%s ~* &* +@all
masteruser %s
masterauth %s
`, ports[i], ports[nodes+i], nd, nd, testUser, testPass, testUser, testPass)
		if err := os.WriteFile(filepath.Join(nd, "node.conf"), []byte(conf), 0o600); err != nil {
			return tc, err
		}
		if err := tc.start(i); err != nil {
			tc.stop()
			return nil, err
		}
	}
	for i := range nodes {
		if err := waitFor(10*time.Second, func() error { _, err := tc.nodeDo(i, "PING"); return err }); err != nil {
			tc.stop()
			return nil, fmt.Errorf("node %d never answered PING: %w (log %s)", i, err, tc.log(i))
		}
	}
	cmd := []string{"--user", testUser, "-a", testPass, "--no-auth-warning", "--cluster", "create"}
	for i := range nodes {
		cmd = append(cmd, tc.addr(i))
	}
	cmd = append(cmd, "--cluster-replicas", "1", "--cluster-yes")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if out, err := exec.CommandContext(ctx, cli, cmd...).CombinedOutput(); err != nil {
		tc.stop()
		return nil, fmt.Errorf("%s --cluster create: %v\n%s", cli, err, out)
	}
	if err := tc.waitHealthy(20 * time.Second); err != nil {
		tc.stop()
		return nil, err
	}
	return tc, nil
}

func (tc *testCluster) start(i int) error {
	nd := filepath.Join(tc.dir, strconv.Itoa(i))
	p := exec.Command(tc.server, filepath.Join(nd, "node.conf"))
	p.Dir = nd
	// Should the test binary die, the kernel kills its servers too.
	p.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := p.Start(); err != nil {
		return err
	}
	tc.mu.Lock()
	tc.procs[i] = p
	tc.mu.Unlock()
	return nil
}

func (tc *testCluster) kill(i int) {
	tc.mu.Lock()
	p := tc.procs[i]
	tc.procs[i] = nil
	tc.mu.Unlock()
	if p != nil {
		p.Process.Kill()
		p.Wait()
	}
}

func (tc *testCluster) signal(i int, sig syscall.Signal) {
	tc.mu.Lock()
	defer tc.mu.Unlock()
	if p := tc.procs[i]; p != nil {
		p.Process.Signal(sig)
	}
}

func (tc *testCluster) stop() {
	for i := range tc.procs {
		tc.signal(i, syscall.SIGCONT) // a stopped process ignores nothing but is slow to die
		tc.kill(i)
	}
	os.RemoveAll(tc.dir)
}

func (tc *testCluster) log(i int) string {
	b, _ := os.ReadFile(filepath.Join(tc.dir, strconv.Itoa(i), "log"))
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return string(b)
}

func (tc *testCluster) index(addr string) int {
	for i := range nodes {
		if tc.addr(i) == addr {
			return i
		}
	}
	return -1
}

// nodeDo runs one command on one node over a fresh connection.
func (tc *testCluster) nodeDo(i int, a ...string) (Value, error) {
	o := tc.opts().withDefaults()
	o.IOTimeout, o.DialTimeout = 2*time.Second, time.Second
	ctx := context.Background()
	c, err := dial(ctx, tc.addr(i), &o)
	if err != nil {
		return Value{}, err
	}
	defer c.close()
	vs, err := c.pipeline(ctx, [][][]byte{args(a...)})
	if err != nil {
		return Value{}, err
	}
	return vs[0], vs[0].Err()
}

// info reads one field of INFO section, or of CLUSTER INFO for "cluster".
func (tc *testCluster) info(i int, section, field string) string {
	cmd := []string{"INFO", section}
	if section == "cluster" {
		cmd = []string{"CLUSTER", "INFO"}
	}
	v, err := tc.nodeDo(i, cmd...)
	if err != nil {
		return ""
	}
	for _, l := range strings.Split(string(v.Str), "\n") {
		if k, val, ok := strings.Cut(strings.TrimSpace(l), ":"); ok && k == field {
			return val
		}
	}
	return ""
}

// waitHealthy waits until every live node says cluster_state:ok, there
// are three masters with a replica each in every node's view, and every
// replica's link to its master is up.
func (tc *testCluster) waitHealthy(d time.Duration) error {
	return waitFor(d, func() error {
		for i := range nodes {
			tc.mu.Lock()
			alive := tc.procs[i] != nil
			tc.mu.Unlock()
			if !alive {
				return fmt.Errorf("node %d is down", i)
			}
			if s := tc.info(i, "cluster", "cluster_state"); s != "ok" {
				return fmt.Errorf("node %d: cluster_state %q", i, s)
			}
			v, err := tc.nodeDo(i, "CLUSTER", "SLOTS")
			if err != nil {
				return err
			}
			masters := map[string]bool{}
			for _, e := range v.Elems {
				if len(e.Elems) != 4 {
					return fmt.Errorf("node %d: a range with %d nodes", i, len(e.Elems)-2)
				}
				masters[strconv.FormatInt(e.Elems[2].Elems[1].Int, 10)] = true
			}
			if len(masters) != 3 {
				return fmt.Errorf("node %d sees %d masters", i, len(masters))
			}
			if tc.info(i, "replication", "role") == "slave" && tc.info(i, "replication", "master_link_status") != "up" {
				return fmt.Errorf("node %d: replica link down", i)
			}
		}
		return nil
	})
}

// waitFor polls cond until it holds or d passes: tests wait on
// conditions, never on fixed sleeps.
func waitFor(d time.Duration, cond func() error) error {
	end := time.Now().Add(d)
	for {
		err := cond()
		if err == nil {
			return nil
		}
		if time.Now().After(end) {
			return fmt.Errorf("after %v: %w", d, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
