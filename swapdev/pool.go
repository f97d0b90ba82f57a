package swapdev

import "fmt"

// A swap device's pages between two daemons: a stop with persist puts
// them in a root pool of the daemon's store, which the backing file
// keeps, and the next start takes them back out (nativekeep.go). The
// store is the daemon's, reached through its router: what the set asks
// of it is this much, which the daemon provides.

// Store is the daemon's page store as swap keeps pages in it, by pool
// and key (a device's block number, or a lost block's lostKey).
type Store interface {
	// Pages reads and writes pool's pages; one per goroutine.
	Pages(pool string) Pages
	// Drop deletes pool's pages of keys 0 to n-1 (no pool: nothing).
	Drop(pool string, n uint64)
}

// Pages is one goroutine's access to a pool.
type Pages interface {
	// Put stores pages, 4096 bytes each back to back, under keys.
	Put(keys []uint64, pages []byte) error
	// Get reads keys into dst; missing[i]: never stored (dst zeros),
	// failed[i]: stored but not readable. A pool never made has every
	// key missing.
	Get(keys []uint64, dst []byte, missing, failed []bool) error
}

// poolName names device n's pool. The space keeps clients from naming
// it (the daemon refuses pool names with spaces: ipc.ValidPool).
func poolName(n int) string { return fmt.Sprintf("(swap %d)", n) }
