//go:build !s4dfault

package pagecache

// Fault injection is compiled in only for tests (build tag s4dfault).
func faultCorrupt([]uint64, [][]byte, []Result) {}
