// Package valkeytest starts a real Valkey (or Redis 7) cluster on loopback
// ports for tests: three masters, three replicas, an ACL user with a
// password and the default user off, noeviction, and a short
// cluster-node-timeout so that a failover takes a few seconds.
package valkeytest

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
	"time"
)

const (
	User  = "s4d"
	Pass  = "test-pass-0123"
	Nodes = 6
)

// Cluster is a running test cluster.
type Cluster struct {
	Dir    string
	Server string // valkey-server or redis-server
	CLI    string
	Ports  []int
	mu     sync.Mutex
	procs  []*exec.Cmd
}

// Binaries finds valkey-server/valkey-cli, or Redis 7's pair.
func Binaries() (server, cli string, err error) {
	for _, p := range [][2]string{{"valkey-server", "valkey-cli"}, {"redis-server", "redis-cli"}} {
		s, e1 := exec.LookPath(p[0])
		c, e2 := exec.LookPath(p[1])
		if e1 == nil && e2 == nil {
			return s, c, nil
		}
	}
	return "", "", fmt.Errorf("neither valkey-server/valkey-cli nor redis-server/redis-cli in PATH (make deps-remote installs them)")
}

// Addr is node i's host:port.
func (tc *Cluster) Addr(i int) string { return "127.0.0.1:" + strconv.Itoa(tc.Ports[i]) }

// URL names the cluster as --remote-tier takes it (two seeds).
func (tc *Cluster) URL() string { return "valkey://" + tc.Addr(0) + "," + tc.Addr(len(tc.Ports)/2) }

// FreePorts holds every listener open until all are chosen, so the ports
// (client and cluster bus) differ.
func FreePorts(n int) ([]int, error) {
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

// Config shapes a test cluster.
type Config struct {
	Masters, Replicas int // replicas per master
	// Extra is appended to every node's configuration, e.g.
	// "cluster-require-full-coverage no" so that the other masters serve
	// their slots while one without a replica is lost.
	Extra string
}

// Start starts six nodes, makes them one cluster with a replica per
// master and waits until every node says cluster_state:ok.
func Start() (*Cluster, error) { return StartWith(Config{Masters: 3, Replicas: 1}) }

// StartWith starts a cluster of cfg's shape (Start's otherwise).
func StartWith(cfg Config) (*Cluster, error) {
	nodes := cfg.Masters * (1 + cfg.Replicas)
	server, cli, err := Binaries()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "s4d-valkey-")
	if err != nil {
		return nil, err
	}
	ports, err := FreePorts(2 * nodes)
	if err != nil {
		return nil, err
	}
	tc := &Cluster{Dir: dir, Server: server, CLI: cli, Ports: ports[:nodes], procs: make([]*exec.Cmd, nodes)}
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
%s
`, ports[i], ports[nodes+i], nd, nd, User, Pass, User, Pass, cfg.Extra)
		if err := os.WriteFile(filepath.Join(nd, "node.conf"), []byte(conf), 0o600); err != nil {
			return tc, err
		}
		if err := tc.StartNode(i); err != nil {
			tc.Stop()
			return nil, err
		}
	}
	for i := range nodes {
		if err := WaitFor(10*time.Second, func() error { _, err := tc.CLIDo(i, "PING"); return err }); err != nil {
			tc.Stop()
			return nil, fmt.Errorf("node %d never answered PING: %w (log %s)", i, err, tc.Log(i))
		}
	}
	cmd := []string{"--user", User, "-a", Pass, "--no-auth-warning", "--cluster", "create"}
	for i := range nodes {
		cmd = append(cmd, tc.Addr(i))
	}
	cmd = append(cmd, "--cluster-replicas", strconv.Itoa(cfg.Replicas), "--cluster-yes")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if out, err := exec.CommandContext(ctx, cli, cmd...).CombinedOutput(); err != nil {
		tc.Stop()
		return nil, fmt.Errorf("%s --cluster create: %v\n%s", cli, err, out)
	}
	err = WaitFor(20*time.Second, func() error {
		for i := range nodes {
			out, err := tc.CLIDo(i, "CLUSTER", "INFO")
			if err != nil {
				return err
			}
			if !strings.Contains(out, "cluster_state:ok") {
				return fmt.Errorf("node %d: cluster not ok yet", i)
			}
		}
		return nil
	})
	if err != nil {
		tc.Stop()
		return nil, err
	}
	return tc, nil
}

// CLIDo runs one command on node i with the CLI, for set-up and checks.
func (tc *Cluster) CLIDo(i int, a ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	args := append([]string{"-h", "127.0.0.1", "-p", strconv.Itoa(tc.Ports[i]), "--user", User, "-a", Pass, "--no-auth-warning"}, a...)
	out, err := exec.CommandContext(ctx, tc.CLI, args...).CombinedOutput()
	s := string(out)
	if err == nil && (strings.HasPrefix(s, "ERR") || strings.HasPrefix(s, "NOAUTH") || strings.HasPrefix(s, "WRONGPASS")) {
		err = fmt.Errorf("%s", strings.TrimSpace(s))
	}
	return s, err
}

// StartNode starts node i (again) from its configuration.
func (tc *Cluster) StartNode(i int) error {
	nd := filepath.Join(tc.Dir, strconv.Itoa(i))
	p := exec.Command(tc.Server, filepath.Join(nd, "node.conf"))
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

// Alive tells whether node i runs (was not killed).
func (tc *Cluster) Alive(i int) bool {
	tc.mu.Lock()
	defer tc.mu.Unlock()
	return tc.procs[i] != nil
}

// Kill kills node i at once (SIGKILL).
func (tc *Cluster) Kill(i int) {
	tc.mu.Lock()
	p := tc.procs[i]
	tc.procs[i] = nil
	tc.mu.Unlock()
	if p != nil {
		p.Process.Kill()
		p.Wait()
	}
}

// Signal sends sig to node i (SIGSTOP freezes it, SIGCONT thaws it).
func (tc *Cluster) Signal(i int, sig syscall.Signal) {
	tc.mu.Lock()
	defer tc.mu.Unlock()
	if p := tc.procs[i]; p != nil {
		p.Process.Signal(sig)
	}
}

// Stop kills every node and removes their files.
func (tc *Cluster) Stop() {
	for i := range tc.procs {
		tc.Signal(i, syscall.SIGCONT) // a stopped process ignores nothing but is slow to die
		tc.Kill(i)
	}
	os.RemoveAll(tc.Dir)
}

// Log is the end of node i's log, for a failure's message.
func (tc *Cluster) Log(i int) string {
	b, _ := os.ReadFile(filepath.Join(tc.Dir, strconv.Itoa(i), "log"))
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return string(b)
}

// Index is the node of addr, or -1.
func (tc *Cluster) Index(addr string) int {
	for i := range tc.Ports {
		if tc.Addr(i) == addr {
			return i
		}
	}
	return -1
}

// WaitFor polls cond until it holds or d passes: tests wait on
// conditions, never on fixed sleeps.
func WaitFor(d time.Duration, cond func() error) error {
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
