//go:build !s4dfault

package daemon

// Fault injection is compiled in only for tests (build tag s4dfault).
func faultSwapTakeover() {}
