//go:build !s4dfault

package backing

// Fault injection is compiled in only for tests (build tag s4dfault).
func fault(op string) error { return nil }
