package remote

import (
	"bytes"
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
)

// Store keeps sealed blocks in a Cluster. Every block is encrypted and
// authenticated with AES-256-GCM under a key derived from the master key;
// its store key names host and pool only through an HMAC, so the cluster
// sees neither names nor page contents.
type Store struct {
	c       *Cluster
	aead    cipher.AEAD
	nameKey []byte
	// MaxBlock is the largest block Put accepts (its sealed form must fit
	// the cluster's reply limit to come back).
	MaxBlock int
}

// Namespace is whose blocks they are. Two daemons with the same master
// key, host name and pool name address the same blocks: that is how a pool
// moves between hosts.
type Namespace struct {
	Host, Pool string
}

// Block is one packed block to store. Gen is the writer's generation for
// this ID: a Get that expects another generation answers ErrStale.
type Block struct {
	ID   uint64
	Gen  uint64
	Data []byte
}

// Ref names a block to read and the generation the index expects.
type Ref struct {
	ID  uint64
	Gen uint64
}

var (
	// ErrMissing: no block under the key (never written, deleted, evicted,
	// or lost with a node).
	ErrMissing = errors.New("remote: block missing")
	// ErrCorrupt: the block failed authentication (tampered, another key,
	// moved from another store key, truncated).
	ErrCorrupt = errors.New("remote: block failed authentication")
	// ErrStale: an authentic block of another generation than expected.
	ErrStale = errors.New("remote: block is stale")
)

// Sealed block: magic, generation, nonce, then GCM ciphertext and tag.
// The header and the store key are the associated data, so a block copied
// to another key, or given another generation, fails authentication.
const (
	sealMagic    = "S4R1"
	headerSize   = len(sealMagic) + 8 + 12
	SealOverhead = headerSize + 16 // bytes a sealed block adds
)

// NewStore derives the block and naming keys from master (32 bytes) so the
// one key file serves both without reusing a key for two purposes.
func NewStore(c *Cluster, master []byte) (*Store, error) {
	if len(master) != KeySize {
		return nil, fmt.Errorf("remote: master key of %d bytes, want %d", len(master), KeySize)
	}
	blk, err := aes.NewCipher(derive(master, "s4d remote block key"))
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(blk)
	if err != nil {
		return nil, err
	}
	return &Store{c: c, aead: aead, nameKey: derive(master, "s4d remote name key"),
		MaxBlock: c.o.Limits.MaxBulk - SealOverhead}, nil
}

func derive(master []byte, label string) []byte {
	m := hmac.New(sha256.New, master)
	m.Write([]byte(label))
	return m.Sum(nil)
}

func (s *Store) tag(parts ...string) string {
	m := hmac.New(sha256.New, s.nameKey)
	for _, p := range parts {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(p)))
		m.Write(n[:]) // length-prefixed, so ("ab","c") and ("a","bc") differ
		m.Write([]byte(p))
	}
	return hex.EncodeToString(m.Sum(nil)[:10])
}

// Prefix is the start of every store key of the namespace, for a sweep
// that scans one host's or one pool's keys: "s4d:HOSTTAG:POOLTAG:".
func (s *Store) Prefix(ns Namespace) string {
	return "s4d:" + s.tag("host", ns.Host) + ":" + s.tag("pool", ns.Host, ns.Pool) + ":"
}

// Key is a block's store key: the namespace prefix, then the block ID in
// hex. An ID is a sequence number, not page data.
func (s *Store) Key(ns Namespace, id uint64) []byte {
	return strconv.AppendUint([]byte(s.Prefix(ns)), id, 16)
}

func (s *Store) seal(key []byte, gen uint64, data []byte) ([]byte, error) {
	out := make([]byte, headerSize, headerSize+len(data)+16)
	copy(out, sealMagic)
	binary.BigEndian.PutUint64(out[4:], gen)
	// A random 96-bit nonce per block: under one key, 2^32 blocks keep the
	// chance of a repeat below 2^-32.
	if _, err := rand.Read(out[12:headerSize]); err != nil {
		return nil, err
	}
	return s.aead.Seal(out, out[12:headerSize], data, s.ad(out[:headerSize], key)), nil
}

func (s *Store) ad(header, key []byte) []byte {
	ad := make([]byte, 0, len(header)+len(key))
	return append(append(ad, header...), key...)
}

func (s *Store) open(key []byte, want uint64, sealed []byte) ([]byte, error) {
	if len(sealed) < SealOverhead || string(sealed[:4]) != sealMagic {
		return nil, ErrCorrupt
	}
	hdr := sealed[:headerSize]
	// Opened in place: the reply's buffer is ours alone, so the plaintext
	// needs no second allocation.
	ct := sealed[headerSize:]
	data, err := s.aead.Open(ct[:0], hdr[12:], ct, s.ad(hdr, key))
	if err != nil {
		return nil, ErrCorrupt
	}
	if gen := binary.BigEndian.Uint64(hdr[4:]); gen != want {
		return nil, fmt.Errorf("%w: generation %d, want %d", ErrStale, gen, want)
	}
	return data, nil
}

// Put seals and writes blocks, pipelined per master. errs[i] is nil only
// once blocks[i] is on its master and, where the master has replicas, on
// Options.MinReplicas of them; until then its pages must stay local.
func (s *Store) Put(ctx context.Context, ns Namespace, blocks []Block) []error {
	errs := make([]error, len(blocks))
	cmds := make([]Cmd, 0, len(blocks))
	idx := make([]int, 0, len(blocks))
	for i, b := range blocks {
		if len(b.Data) > s.MaxBlock {
			errs[i] = fmt.Errorf("remote: block %x of %d bytes (limit %d)", b.ID, len(b.Data), s.MaxBlock)
			continue
		}
		key := s.Key(ns, b.ID)
		sealed, err := s.seal(key, b.Gen, b.Data)
		if err != nil {
			errs[i] = err
			continue
		}
		cmds = append(cmds, Cmd{Key: key, Args: [][]byte{[]byte("SET"), key, sealed}, Write: true})
		idx = append(idx, i)
	}
	for j, r := range s.c.Do(ctx, cmds) {
		i := idx[j]
		if r.Err != nil {
			errs[i] = fmt.Errorf("remote: put block %x: %w", blocks[i].ID, r.Err)
		} else if string(r.Val.Str) != "OK" {
			errs[i] = fmt.Errorf("remote: put block %x: unexpected reply %q", blocks[i].ID, trunc(r.Val.Str))
		}
	}
	return errs
}

// Get reads blocks, pipelined per master. For each ref either data[i] is
// the block exactly as written or errs[i] says why not (ErrMissing,
// ErrCorrupt, ErrStale, or the cluster's error): never other bytes.
func (s *Store) Get(ctx context.Context, ns Namespace, refs []Ref) (data [][]byte, errs []error) {
	data, errs = make([][]byte, len(refs)), make([]error, len(refs))
	cmds := make([]Cmd, len(refs))
	for i, r := range refs {
		key := s.Key(ns, r.ID)
		cmds[i] = Cmd{Key: key, Args: [][]byte{[]byte("GET"), key}}
	}
	for i, r := range s.c.Do(ctx, cmds) {
		id := refs[i].ID
		switch {
		case r.Err != nil:
			errs[i] = fmt.Errorf("remote: get block %x: %w", id, r.Err)
		case r.Val.Null:
			errs[i] = fmt.Errorf("remote: get block %x: %w", id, ErrMissing)
		case r.Val.Kind != '$':
			errs[i] = fmt.Errorf("remote: get block %x: reply of type %q: %w", id, r.Val.Kind, ErrCorrupt)
		default:
			d, err := s.open(cmds[i].Key, refs[i].Gen, r.Val.Str)
			if err != nil {
				errs[i] = fmt.Errorf("remote: get block %x: %w", id, err)
			} else {
				data[i] = d
			}
		}
	}
	return data, errs
}

// Delete removes blocks; a block already gone is no error. Deletes are
// not waited on by replicas: a delete lost in a failover leaves a block no
// index references, which the sweep removes.
func (s *Store) Delete(ctx context.Context, ns Namespace, ids []uint64) []error {
	errs := make([]error, len(ids))
	cmds := make([]Cmd, len(ids))
	for i, id := range ids {
		key := s.Key(ns, id)
		cmds[i] = Cmd{Key: key, Args: [][]byte{[]byte("DEL"), key}}
	}
	for i, r := range s.c.Do(ctx, cmds) {
		if r.Err != nil {
			errs[i] = fmt.Errorf("remote: delete block %x: %w", ids[i], r.Err)
		}
	}
	return errs
}

// HostPrefix starts the store key of every block of host, whatever its
// pool: a sweep of a host's blocks scans HostPrefix(host)+"*".
func (s *Store) HostPrefix(host string) string {
	return "s4d:" + s.tag("host", host) + ":"
}

// List returns the IDs of the blocks the cluster holds for ns, in no
// order (see Cluster.Scan for what a failover during it may do).
func (s *Store) List(ctx context.Context, ns Namespace) ([]uint64, error) {
	prefix := s.Prefix(ns)
	var ids []uint64
	err := s.c.Scan(ctx, prefix+"*", func(k []byte) error {
		rest, ok := bytes.CutPrefix(k, []byte(prefix))
		id, err := strconv.ParseUint(string(rest), 16, 64)
		if !ok || err != nil {
			return fmt.Errorf("remote: key %q under %s is not a block of ours", k, prefix)
		}
		ids = append(ids, id)
		return nil
	})
	return ids, err
}
