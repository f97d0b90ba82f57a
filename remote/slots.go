package remote

// The cluster's slot map: which master serves which of the 16384 hash
// slots, read with CLUSTER SLOTS and corrected by MOVED answers.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
)

type slotRange struct {
	lo, hi int
	sh     *shard
}

func (c *Cluster) fetchSlots(ctx context.Context, addr string) ([]slotRange, error) {
	n := c.node(addr)
	cn, _, err := n.get(ctx, &c.o)
	if err != nil {
		return nil, err
	}
	vs, err := cn.pipeline(ctx, [][][]byte{args("CLUSTER", "SLOTS")})
	n.put(cn)
	if err != nil {
		return nil, fmt.Errorf("remote: %s: %w", addr, err)
	}
	v := vs[0]
	if e := v.Err(); e != nil {
		if strings.Contains(strings.ToLower(e.Error()), "cluster support disabled") {
			return []slotRange{{0, numSlots - 1, &shard{master: addr}}}, nil
		}
		return nil, fmt.Errorf("remote: %s: CLUSTER SLOTS: %w: %w", addr, errSlotMap, e)
	}
	host, _, _ := net.SplitHostPort(addr)
	var out []slotRange
	for _, e := range v.Elems {
		if len(e.Elems) < 3 || e.Elems[0].Kind != ':' || e.Elems[1].Kind != ':' {
			return nil, protoErr("CLUSTER SLOTS entry from %s", addr)
		}
		lo, hi := int(e.Elems[0].Int), int(e.Elems[1].Int)
		if lo < 0 || hi >= numSlots || lo > hi {
			return nil, protoErr("CLUSTER SLOTS range %d-%d from %s", lo, hi, addr)
		}
		var nodes []string
		for _, nd := range e.Elems[2:] {
			if len(nd.Elems) < 2 || nd.Elems[1].Kind != ':' {
				return nil, protoErr("CLUSTER SLOTS node from %s", addr)
			}
			h := string(nd.Elems[0].Str)
			if h == "?" {
				continue // endpoint unknown to this node
			}
			if h == "" {
				h = host
			}
			nodes = append(nodes, net.JoinHostPort(h, strconv.FormatInt(nd.Elems[1].Int, 10)))
		}
		if len(nodes) == 0 {
			continue
		}
		out = append(out, slotRange{lo, hi, &shard{master: nodes[0], replicas: nodes[1:]}})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("remote: %s: no slots assigned: %w", addr, errSlotMap)
	}
	return out, nil
}

// errSlotMap is a node that answers but gives no usable slot map: not a
// node down.
var errSlotMap = errors.New("no usable slot map")

func (c *Cluster) install(ranges []slotRange) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.slots = [numSlots]*shard{}
	c.shards = map[string]*shard{}
	for _, r := range ranges {
		sh := c.shards[r.sh.master]
		if sh == nil {
			sh = r.sh
			c.shards[sh.master] = sh
		}
		for s := r.lo; s <= r.hi; s++ {
			c.slots[s] = sh
		}
	}
}

// moved records one MOVED answer until the next refresh.
func (c *Cluster) moved(slot int, addr string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	sh := c.shards[addr]
	if sh == nil {
		sh = &shard{master: addr}
		c.shards[addr] = sh
	}
	c.slots[slot] = sh
}

func (c *Cluster) route(key []byte) (string, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	sh := c.slots[Slot(key)]
	if sh == nil {
		return "", false
	}
	return sh.master, true
}

func (c *Cluster) replicaCount(addr string) int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if sh := c.shards[addr]; sh != nil {
		return len(sh.replicas)
	}
	return 0
}

// Slot is the cluster hash slot of key (CRC16/XMODEM of the key, or of
// its {hash tag}).
func Slot(key []byte) int {
	if i := indexByte(key, '{'); i >= 0 {
		if j := indexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	var crc uint16
	for _, b := range key {
		crc ^= uint16(b) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return int(crc) % numSlots
}

func indexByte(b []byte, c byte) int {
	for i, x := range b {
		if x == c {
			return i
		}
	}
	return -1
}
