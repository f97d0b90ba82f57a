package topo

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestParseList(t *testing.T) {
	got, err := ParseList("0-3,8,10-11")
	if err != nil || !slices.Equal(got, []int{0, 1, 2, 3, 8, 10, 11}) {
		t.Fatalf("%v %v", got, err)
	}
	for _, bad := range []string{"3-1", "a", "1,,2", "-4"} {
		if _, err := ParseList(bad); err == nil {
			t.Errorf("%q read as a CPU list", bad)
		}
	}
}

// A host of two nodes, faked under a temporary root.
func TestFakedHost(t *testing.T) {
	root := t.TempDir()
	put := func(p, s string) {
		p = filepath.Join(root, p)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	put("sys/bus/pci/devices/0000:9b:00.0/numa_node", "1\n")
	put("sys/bus/pci/devices/0000:1b:00.0/numa_node", "-1\n")
	put("sys/devices/system/node/node0/cpulist", "0-3\n")
	put("sys/devices/system/node/node1/cpulist", "4-7\n")
	put("proc/10/numa_maps", "7f00 default anon=9 N0=2 N1=7 kernelpagesize_kB=4\n7f10 default\n")
	put("proc/11/status", "Cpus_allowed_list:\t5-6\n")
	put("proc/12/status", "Cpus_allowed_list:\t3-4\n")
	h := Topo{Root: root}
	if n := h.PCINode("0000:9b:00.0"); n != 1 {
		t.Errorf("PCINode %d, want 1", n)
	}
	if n := h.PCINode("0000:1b:00.0"); n != -1 {
		t.Errorf("a device of no node is on %d", n)
	}
	nodes, err := h.Nodes()
	if err != nil || len(nodes) != 2 || !slices.Equal(nodes[1], []int{4, 5, 6, 7}) {
		t.Fatalf("nodes %v %v", nodes, err)
	}
	for pid, want := range map[int]int{10: 1, 11: 1, 12: -1, 13: -1} {
		if n := h.ProcNode(pid); n != want {
			t.Errorf("process %d on node %d, want %d", pid, n, want)
		}
	}
}

// The real kernel: a page of ours is on one of the host's nodes, or the
// kernel will not say (-1).
func TestAddrNode(t *testing.T) {
	if AddrNode(nil) != -1 {
		t.Fatal("no memory, yet a node")
	}
	buf := make([]byte, 1<<16)
	buf[0] = 1
	n := AddrNode(buf)
	nodes, _ := Host.Nodes()
	if _, ok := nodes[n]; n != -1 && !ok {
		t.Fatalf("page on node %d; the host has %v", n, nodes)
	}
	t.Logf("node %d", n)
}
