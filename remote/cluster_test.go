package remote

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/s4d-project/s4d/remote/valkeytest"
)

// A real cluster on loopback ports (valkeytest): three masters, three
// replicas, an ACL user with a password and the default user off,
// noeviction, a failover in a few seconds. One cluster is shared by the
// package's tests and benchmarks; TestMain kills it.

const (
	testUser = valkeytest.User
	testPass = valkeytest.Pass
	nodes    = valkeytest.Nodes
)

type testCluster struct {
	*valkeytest.Cluster
	ports []int
}

var (
	clusterOnce sync.Once
	shared      *testCluster
	sharedErr   error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if shared != nil {
		shared.Stop()
	}
	os.Exit(code)
}

func binaries() (server, cli string, err error) { return valkeytest.Binaries() }

func freePorts(n int) ([]int, error) { return valkeytest.FreePorts(n) }

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

func (tc *testCluster) addr(i int) string { return tc.Addr(i) }

func (tc *testCluster) opts() Options {
	return Options{Addrs: []string{tc.addr(0), tc.addr(3)}, User: testUser, Password: testPass}
}

// startCluster starts the cluster and waits, with our own client, until
// it is whole: every slot served by a master with a replica.
func startCluster() (*testCluster, error) {
	vc, err := valkeytest.Start()
	if err != nil {
		return nil, err
	}
	tc := &testCluster{Cluster: vc, ports: vc.Ports}
	if err := tc.waitHealthy(20 * time.Second); err != nil {
		tc.Stop()
		return nil, err
	}
	return tc, nil
}

func (tc *testCluster) start(i int) error                { return tc.StartNode(i) }
func (tc *testCluster) kill(i int)                       { tc.Kill(i) }
func (tc *testCluster) signal(i int, sig syscall.Signal) { tc.Signal(i, sig) }
func (tc *testCluster) log(i int) string                 { return tc.Log(i) }
func (tc *testCluster) index(addr string) int            { return tc.Index(addr) }

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
			if !tc.Alive(i) {
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

// waitFor polls cond until it holds or d passes.
func waitFor(d time.Duration, cond func() error) error { return valkeytest.WaitFor(d, cond) }
