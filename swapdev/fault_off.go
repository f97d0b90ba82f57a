//go:build !s4dfault

package swapdev

// Fault injection is compiled in only for tests (build tag s4dfault).
func faultSwapTakeover() {}
