package pageindex

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
	ix Index
	_  [128 - unsafe.Sizeof(sync.RWMutex{}) - unsafe.Sizeof(Index{})]byte
}

// Shards is a pool's index. Its zero value is empty and ready.
type Shards [1 << shardBits]shard

func shardOf(key uint64) int { return int(key>>runBits) & (1<<shardBits - 1) }

// Walk holds one shard's lock at a time while a batch goes through its
// keys, changing locks only when a key falls in another shard.
type Walk struct {
	sh    *Shards
	cur   int
	write bool
}

// Walk starts a walk, taking write locks if write, else read locks.
func (sh *Shards) Walk(write bool) Walk { return Walk{sh: sh, cur: -1, write: write} }

// At returns the index that holds key, its shard locked.
func (w *Walk) At(key uint64) *Index {
	if i := shardOf(key); i != w.cur {
		w.Done()
		w.cur = i
		if w.write {
			w.sh[i].mu.Lock()
		} else {
			w.sh[i].mu.RLock()
		}
	}
	return &w.sh[w.cur].ix
}

// Done lets go of the lock held, if any.
func (w *Walk) Done() {
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

// Get is Index.Get under key's shard's read lock.
func (sh *Shards) Get(key uint64) (Entry, bool) {
	s := &sh[shardOf(key)]
	s.mu.RLock()
	e, ok := s.ix.Get(key)
	s.mu.RUnlock()
	return e, ok
}

// Bytes is the memory the shards' tables hold.
func (sh *Shards) Bytes() uint64 {
	var n uint64
	for i := range sh {
		sh[i].mu.RLock()
		n += sh[i].ix.Bytes()
		sh[i].mu.RUnlock()
	}
	return n
}

// Each calls fn for every stored key, one shard locked at a time; fn may
// change the entry in place.
func (sh *Shards) Each(fn func(key uint64, e *Entry)) {
	for i := range sh {
		sh[i].mu.Lock()
		sh[i].ix.Each(fn)
		sh[i].mu.Unlock()
	}
}

// EachLoaded calls fn with every stored entry, loaded atomically, each
// shard read-locked in turn, until fn returns false; it says whether fn
// saw them all.
func (sh *Shards) EachLoaded(fn func(key uint64, e Entry) bool) bool {
	for i := range sh {
		s := &sh[i]
		s.mu.RLock()
		for j := range s.ix.slots {
			if e := s.ix.slots[j].Load(); e != 0 && !fn(s.ix.slots[j].key, e) {
				s.mu.RUnlock()
				return false
			}
		}
		s.mu.RUnlock()
	}
	return true
}

// sharedChunk is how many slots a shared walk visits per hold of a
// shard's read lock, so that a writer waits for a few microseconds, not
// for a whole shard of a large pool.
const sharedChunk = 1024

// EachShared calls fn for every stored slot under its shard's read lock;
// fn may change the entry only with Slot.CAS, and only its age or
// tried bit (readers hold the same lock). An entry a writer moves between
// two chunks may be seen twice or not at all: good enough for ages.
func (sh *Shards) EachShared(fn func(key uint64, s *Slot)) {
	for i := range sh {
		for lo := 0; ; lo += sharedChunk {
			sh[i].mu.RLock()
			slots := sh[i].ix.slots
			if lo >= len(slots) {
				sh[i].mu.RUnlock()
				break
			}
			for j := lo; j < min(lo+sharedChunk, len(slots)); j++ {
				if s := &slots[j]; s.Load() != 0 {
					fn(s.key, s)
				}
			}
			sh[i].mu.RUnlock()
		}
	}
}

// Tick adds an epoch to every entry's age, saturating at MaxAge, under
// read locks (EachShared).
func (sh *Shards) Tick() {
	sh.EachShared(func(_ uint64, sl *Slot) {
		for {
			e := sl.Load()
			if e == 0 || e.Age() == MaxAge || sl.CAS(e, e.WithAge(e.Age()+1)) {
				return
			}
		}
	})
}

// MarkIdle makes every entry read MaxAge until it is next read or
// written, and says how many it marked.
func (sh *Shards) MarkIdle() (n uint64) {
	sh.EachShared(func(_ uint64, sl *Slot) {
		for {
			e := sl.Load()
			if e == 0 || sl.CAS(e, e.WithAge(MaxAge)) {
				n++
				return
			}
		}
	})
	return n
}
