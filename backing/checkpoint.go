package backing

import "fmt"

// Checkpoints: the index goes into blocks of its own, then the header copy
// not written last points at it, each step synced before the next, so a
// crash at any point leaves one copy naming a whole index. The blocks of
// the index before go back only after that.

// BeginCheckpoint marks the moment the caller takes the index it will
// write: blocks freed before now are no longer in it, and are released
// when the checkpoint is durable. Call it while the pages are held still.
func (bf *File) BeginCheckpoint() {
	bf.cp.Lock()
	bf.mu.Lock()
	bf.a.beginCheckpoint()
	bf.mu.Unlock()
}

// Checkpoint writes idx and makes it the one a restart reads. It must
// follow BeginCheckpoint.
func (bf *File) Checkpoint(idx *Index) (err error) {
	defer bf.cp.Unlock()
	ok := false
	defer func() {
		bf.mu.Lock()
		bf.a.endCheckpoint(ok)
		bf.mu.Unlock()
	}()
	body := idx.Encode(nil)
	n := (uint64(len(body)) + BlockSize - 1) / BlockSize
	bf.mu.Lock()
	start, got, found := bf.a.findRun(n, n)
	if found {
		bf.a.hold(start, got)
	}
	bf.mu.Unlock()
	if !found {
		bf.st.writeErrors.Add(1)
		return fmt.Errorf("checkpoint: %w: no %d free blocks in a row for the index", ErrFull, n)
	}
	giveBack := func() {
		bf.mu.Lock()
		bf.a.unhold(start, n)
		bf.mu.Unlock()
	}
	buf := alignedBuf(int(n * BlockSize))
	copy(buf, body)
	if err := bf.writeAt(buf, int64(start*BlockSize)); err != nil {
		giveBack()
		bf.st.writeErrors.Add(1)
		return fmt.Errorf("checkpoint: writing the index: %w", err)
	}
	if err := bf.f.Sync(); err != nil {
		giveBack()
		return fmt.Errorf("checkpoint: sync: %w", err)
	}
	if bf.verify {
		if err := bf.check(run{block: start, buf: buf}); err != nil {
			giveBack()
			bf.st.writeErrors.Add(1)
			return fmt.Errorf("checkpoint: %w", err)
		}
	}
	h := bf.hdr
	h.Seq++
	h.IndexOff, h.IndexLen, h.IndexSum = start*BlockSize, uint64(len(body)), crcOf(body)
	hb := alignedBuf(BlockSize)
	copy(hb, h.encode())
	if err := bf.writeAt(hb, int64(bf.next*BlockSize)); err != nil {
		giveBack()
		bf.st.writeErrors.Add(1)
		return fmt.Errorf("checkpoint: writing the header: %w", err)
	}
	if err := bf.f.Sync(); err != nil {
		giveBack()
		return fmt.Errorf("checkpoint: sync: %w", err)
	}
	old := bf.index
	// Only the fields a checkpoint changes: Size and Unit read the others
	// from other goroutines (STATS) without a lock.
	bf.hdr.Seq, bf.hdr.IndexOff, bf.hdr.IndexLen, bf.hdr.IndexSum = h.Seq, h.IndexOff, h.IndexLen, h.IndexSum
	bf.next, bf.index = 1-bf.next, [2]uint64{start, n}
	bf.mu.Lock()
	if old[1] > 0 {
		bf.a.unhold(old[0], old[1])
	}
	bf.mu.Unlock()
	bf.st.checkpoints.Add(1)
	ok = true
	return nil
}
