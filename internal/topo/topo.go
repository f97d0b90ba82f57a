// Package topo reads the host's NUMA layout from /sys and /proc: which node
// a PCIe device hangs off, which nodes a process's memory and CPUs are on,
// and which node holds a page of our own memory. Routing uses it to send a
// batch to the GPU nearest the memory it is read from or written to.
//
// A Topo reads under Root ("" or "/": the real files), so tests describe
// a host with several nodes in a temporary directory; the machines we run
// on may show one node only.
package topo

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Topo reads the files under Root.
type Topo struct{ Root string }

// Host is the real machine.
var Host = Topo{}

func (t Topo) path(p string) string { return filepath.Join(cmpOr(t.Root, "/"), p) }

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// PCINode is the NUMA node of the PCI device at bdf ("0000:3b:00.0"), or
// -1 when the kernel does not know (one node, or no such file).
func (t Topo) PCINode(bdf string) int {
	b, err := os.ReadFile(t.path(filepath.Join("sys/bus/pci/devices", strings.ToLower(bdf), "numa_node")))
	if err != nil {
		return -1
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || n < 0 {
		return -1
	}
	return n
}

// Nodes maps each NUMA node to its CPUs (from node*/cpulist).
func (t Topo) Nodes() (map[int][]int, error) {
	dirs, err := filepath.Glob(t.path("sys/devices/system/node/node[0-9]*"))
	if err != nil {
		return nil, err
	}
	out := map[int][]int{}
	for _, d := range dirs {
		n, err := strconv.Atoi(strings.TrimPrefix(filepath.Base(d), "node"))
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join(d, "cpulist"))
		if err != nil {
			return nil, err
		}
		cpus, err := ParseList(strings.TrimSpace(string(b)))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", filepath.Join(d, "cpulist"), err)
		}
		out[n] = cpus
	}
	return out, nil
}

// ParseList reads a kernel CPU list: "0-3,8,10-11".
func ParseList(s string) ([]int, error) {
	var out []int
	if s == "" {
		return nil, nil
	}
	for _, part := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		if err != nil {
			return nil, fmt.Errorf("bad CPU list %q", s)
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil || b < a {
				return nil, fmt.Errorf("bad CPU list %q", s)
			}
		}
		for c := a; c <= b; c++ {
			out = append(out, c)
		}
	}
	return out, nil
}

// ProcNode is the NUMA node nearest process pid's memory: the node holding
// most of its pages (numa_maps), else the one node all the CPUs it may run
// on belong to (Cpus_allowed_list); -1 when neither says.
func (t Topo) ProcNode(pid int) int {
	if n := t.pagesNode(pid); n >= 0 {
		return n
	}
	return t.cpusNode(pid)
}

// pagesNode sums numa_maps' N<node>=<pages> fields over the mappings.
func (t Topo) pagesNode(pid int) int {
	f, err := os.Open(t.path(fmt.Sprintf("proc/%d/numa_maps", pid)))
	if err != nil {
		return -1
	}
	defer f.Close()
	pages := map[int]int{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		for _, fld := range bytes.Fields(sc.Bytes()) {
			if len(fld) < 4 || fld[0] != 'N' {
				continue
			}
			k, v, ok := bytes.Cut(fld[1:], []byte("="))
			if !ok {
				continue
			}
			n, err1 := strconv.Atoi(string(k))
			c, err2 := strconv.Atoi(string(v))
			if err1 == nil && err2 == nil {
				pages[n] += c
			}
		}
	}
	best, most := -1, 0
	for n, c := range pages {
		if c > most || c == most && n < best {
			best, most = n, c
		}
	}
	return best
}

// cpusNode is the node every CPU of Cpus_allowed_list belongs to, or -1.
func (t Topo) cpusNode(pid int) int {
	b, err := os.ReadFile(t.path(fmt.Sprintf("proc/%d/status", pid)))
	if err != nil {
		return -1
	}
	var list string
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "Cpus_allowed_list:"); ok {
			list = strings.TrimSpace(v)
		}
	}
	cpus, err := ParseList(list)
	if err != nil || len(cpus) == 0 {
		return -1
	}
	nodes, err := t.Nodes()
	if err != nil {
		return -1
	}
	of := map[int]int{}
	for n, cs := range nodes {
		for _, c := range cs {
			of[c] = n
		}
	}
	node := -1
	for _, c := range cpus {
		n, ok := of[c]
		if !ok || node >= 0 && n != node {
			return -1 // spread over nodes (or unknown): no nearest
		}
		node = n
	}
	return node
}
