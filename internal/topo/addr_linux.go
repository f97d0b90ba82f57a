package topo

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// AddrNode is the NUMA node of the page holding mem's first byte (mapped
// in this process: a client's memfd, a slab of the store), or -1. One
// get_mempolicy call: cheap next to a batch.
func AddrNode(mem []byte) int {
	if len(mem) == 0 {
		return -1
	}
	const mpolFNode, mpolFAddr = 1, 2
	var node int32
	_, _, errno := unix.Syscall6(unix.SYS_GET_MEMPOLICY, uintptr(unsafe.Pointer(&node)), 0, 0,
		uintptr(unsafe.Pointer(&mem[0])), mpolFNode|mpolFAddr, 0)
	if errno != 0 {
		return -1
	}
	return int(node)
}
