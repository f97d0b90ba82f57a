//go:build !s4dfault

package routing

// Fault injection is compiled in only for tests (build tag s4dfault).
func faultBackend(string) error { return nil }
