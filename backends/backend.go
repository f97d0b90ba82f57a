// Package backends defines the batch compression interface every engine
// implements and the registry that reports which engines are usable on
// this machine. The pages, batches and stored formats they share are in
// package pagefmt.
package backends

import (
	"context"

	"github.com/s4d-project/s4d/pagefmt"
)

// SumChecker is implemented by backends that check pages' Sums on their
// way through them (in cache, or on their device). The caller checks
// pages itself before handing them to any other backend.
type SumChecker interface {
	ChecksSums()
}

// Backend compresses and decompresses batches of pages. Implementations
// must be safe for concurrent use.
type Backend interface {
	Name() string
	// Describe says what the backend runs on, for stats ("16 workers",
	// "NVIDIA H100 via Vulkan").
	Describe() string
	// Compress classifies and compresses every page of b into out. An
	// error means the backend failed as a whole: nothing in out is valid
	// and the caller redoes the batch elsewhere.
	Compress(ctx context.Context, b *pagefmt.Batch, out *pagefmt.Compressed) error
	// Decompress expands every page of d. Pages whose data does not decode
	// are flagged in d.Failed; an error means the backend failed as a whole.
	Decompress(ctx context.Context, d *pagefmt.Decompression) error
	Close() error
}

// PartCompressor is implemented by backends that finish a batch in parts
// (a GPU's pipeline of buffers). CompressParts does what Compress does but
// hands each part to deliver as soon as it is done, its bytes still in the
// backend's own buffers, instead of gathering the parts into one output:
// a caller that copies them away anyway (into a store) saves a copy.
// part describes pages [lo, lo+len(part.Class)) of b, indexed from 0, and
// is valid only during the call; Bytes(i, b) needs the part's own Batch.
// An error from deliver ends the batch and is returned as it is; any other
// error means the backend failed, and parts already delivered are void.
type PartCompressor interface {
	CompressParts(ctx context.Context, b *pagefmt.Batch, deliver func(lo int, part *pagefmt.Compressed) error) error
}

// Pinner is implemented by backends that can transfer straight from host
// memory once it is registered with their device (page-locked for DMA).
// Pin registers mem, which must stay mapped until unpin is called; batches
// whose pages lie inside a pinned range skip the staging copy. Registering
// costs milliseconds, so callers pin memory they will reuse (a client's
// shared page buffer), not each batch.
type Pinner interface {
	Pin(mem []byte) (unpin func(), err error)
}

// Warming is implemented by backends that make pinned memory ready for
// direct transfers in the background (a GPU importing a client's fresh
// mapping on first use): until it is, a batch from mem costs them a
// staging copy. Warming starts that work if it has not begun, and
// reports whether it is still under way; the router then gives the
// batch to the next engine, when the choice is its own.
type Warming interface {
	Warming(mem []byte) bool
}

// Limited is a backend that takes only some batches: Takes says whether it
// compresses, and decodes, pages of codec at pageSize. The router passes
// the others to the next backend, so an engine keeps no fallback of its
// own; a backend that is not Limited takes every batch.
type Limited interface {
	Takes(codec pagefmt.Codec, pageSize int) bool
}

// Takes reports whether be takes batches of codec at pageSize.
func Takes(be Backend, codec pagefmt.Codec, pageSize int) bool {
	l, ok := be.(Limited)
	return !ok || l.Takes(codec, pageSize)
}
