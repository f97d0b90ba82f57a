package pagecache

import (
	"sync"
	"unsafe"
)

// A pool's index is split into shards, each with its own lock, so that
// batches over different key ranges publish their entries in parallel:
// one lock for the whole store capped PUT at about 20 GB/s on 16 cores
// (every page's index update waited in line). Runs of 1024 consecutive
// keys share a shard, so a batch of ascending keys takes few locks.
const (
	shardBits = 4
	runBits   = 10
)

// A shard takes two cache lines of its own: batches that update
// neighbouring shards on different cores would otherwise pass one line
// back and forth for every key (each update reads the table's header and
// counts the key in it).
type shard struct {
	mu sync.RWMutex
	ix index
	_  [128 - unsafe.Sizeof(sync.RWMutex{}) - unsafe.Sizeof(index{})]byte
}

type shards [1 << shardBits]shard

func shardOf(key uint64) int { return int(key>>runBits) & (1<<shardBits - 1) }

// walk holds one shard's lock at a time while a batch goes through its
// keys, changing locks only when a key falls in another shard.
type walk struct {
	sh    *shards
	cur   int
	write bool
}

func (sh *shards) walk(write bool) walk { return walk{sh: sh, cur: -1, write: write} }

// at returns the index that holds key, its shard locked.
func (w *walk) at(key uint64) *index {
	if i := shardOf(key); i != w.cur {
		w.done()
		w.cur = i
		if w.write {
			w.sh[i].mu.Lock()
		} else {
			w.sh[i].mu.RLock()
		}
	}
	return &w.sh[w.cur].ix
}

// done lets go of the lock held, if any.
func (w *walk) done() {
	if w.cur < 0 {
		return
	}
	if w.write {
		w.sh[w.cur].mu.Unlock()
	} else {
		w.sh[w.cur].mu.RUnlock()
	}
	w.cur = -1
}

// bytes is the memory the shards' tables hold.
func (sh *shards) bytes() uint64 {
	var n uint64
	for i := range sh {
		sh[i].mu.RLock()
		n += sh[i].ix.bytes()
		sh[i].mu.RUnlock()
	}
	return n
}

// each calls fn for every stored key, one shard locked at a time; fn may
// change the entry in place.
func (sh *shards) each(fn func(key uint64, e *entry)) {
	for i := range sh {
		sh[i].mu.Lock()
		sh[i].ix.each(fn)
		sh[i].mu.Unlock()
	}
}
