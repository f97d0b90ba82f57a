package remote

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// The level's table across a restart: Marshal's bytes go in the cold
// tier's checkpoint beside the store's records; at the next start Restore
// reads them, the store's Restore claims each place a page still names
// (Claim), and Settle frees the places no page claimed, deleting blocks
// left empty. A block written after the checkpoint is in no table: the
// sweep removes it.

const tableMagic = "S4RL1\x00\x00\x00"

// Marshal encodes the table: the next block ID, the blocks (ID, generation,
// size), then the places in use (number, block, slot).
func (l *Level) Marshal() []byte {
	l.mu.Lock()
	defer l.mu.Unlock()
	b := append([]byte(nil), tableMagic...)
	b = binary.LittleEndian.AppendUint64(b, l.nextID)
	b = binary.LittleEndian.AppendUint64(b, uint64(len(l.blocks)))
	for id, bl := range l.blocks {
		b = binary.LittleEndian.AppendUint64(b, id)
		b = binary.LittleEndian.AppendUint64(b, bl.gen)
		b = binary.LittleEndian.AppendUint32(b, uint32(bl.size))
	}
	n := 0
	for _, p := range l.places[1:] {
		if p.block != 0 {
			n++
		}
	}
	b = binary.LittleEndian.AppendUint64(b, uint64(n))
	for i, p := range l.places {
		if i > 0 && p.block != 0 {
			b = binary.LittleEndian.AppendUint32(b, uint32(i))
			b = binary.LittleEndian.AppendUint64(b, p.block)
			b = binary.LittleEndian.AppendUint32(b, p.slot)
		}
	}
	return b
}

var errTable = errors.New("remote: the level's table is damaged")

// Restore loads a table made by Marshal into an empty level. Every place
// starts unclaimed.
func (l *Level) Restore(b []byte) error {
	if len(b) < len(tableMagic)+16 || string(b[:len(tableMagic)]) != tableMagic {
		return errTable
	}
	b = b[len(tableMagic):]
	next, nb := binary.LittleEndian.Uint64(b), binary.LittleEndian.Uint64(b[8:])
	b = b[16:]
	if nb > uint64(len(b))/20 {
		return errTable
	}
	blocks := make(map[uint64]*blockInfo, nb)
	for range nb {
		id := binary.LittleEndian.Uint64(b)
		if id == 0 || blocks[id] != nil {
			return fmt.Errorf("%w: block %d", errTable, id)
		}
		blocks[id] = &blockInfo{gen: binary.LittleEndian.Uint64(b[8:]), size: int(binary.LittleEndian.Uint32(b[16:]))}
		b = b[20:]
	}
	if len(b) < 8 {
		return errTable
	}
	np := binary.LittleEndian.Uint64(b)
	b = b[8:]
	if np != uint64(len(b))/16 || len(b)%16 != 0 {
		return errTable
	}
	places := []place{{}}
	for range np {
		i := binary.LittleEndian.Uint32(b)
		p := place{block: binary.LittleEndian.Uint64(b[4:]), slot: binary.LittleEndian.Uint32(b[12:])}
		b = b[16:]
		if i == 0 || i >= RemoteLoc || blocks[p.block] == nil {
			return fmt.Errorf("%w: place %d", errTable, i)
		}
		for uint32(len(places)) <= i {
			places = append(places, place{})
		}
		if places[i].block != 0 {
			return fmt.Errorf("%w: place %d twice", errTable, i)
		}
		places[i] = p
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.blocks) != 0 {
		return errors.New("remote: Restore into a level in use")
	}
	// This start's IDs stay its own (NewLevel): next is kept in the
	// format for a reader that wants it.
	_ = next
	l.blocks, l.places = blocks, places
	l.claimed = make([]bool, len(places))
	return nil
}

// Claim marks a restored place as named by a page again.
func (l *Level) Claim(loc uint32) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	_, b, ok := l.lookup(loc)
	i := loc &^ RemoteLoc
	if !ok || l.claimed == nil || l.claimed[i] {
		return fmt.Errorf("remote: place %#x not in the table, or claimed twice", loc)
	}
	l.claimed[i] = true
	b.live++
	return nil
}

// Settle ends a restore: places no page claimed are freed, and blocks
// with no claimed place are queued for deletion (Flush).
func (l *Level) Settle() {
	l.mu.Lock()
	for i := 1; i < len(l.places); i++ {
		if l.places[i].block == 0 || !l.claimed[i] {
			l.places[i] = place{}
			l.free = append(l.free, uint32(i))
		}
	}
	l.claimed = nil
	for id, b := range l.blocks {
		if b.live == 0 {
			l.doomed = append(l.doomed, id)
		}
	}
	l.mu.Unlock()
	l.collect()
}
