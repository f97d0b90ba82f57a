//go:build !s4dfault

package webgpu

// Fault injection is compiled in only for tests (build tag s4dfault).
func faultLost() error { return nil }
