// The swap store of the native I/O path (issue 40): zram's shape, in C,
// so that a request the kernel makes while reclaiming memory is served
// without the Go runtime. See doc.go for who calls what.
#ifndef S4D_SWAPIO_STORE_H
#define S4D_SWAPIO_STORE_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#define S4D_PAGE 4096
#define S4D_SLAB (64 << 10)  // a slab: 16 pages, its header in its first 64 bytes
#define S4D_SLAB_HDR 64
#define S4D_CLASS_STEP 64    // size classes 64, 128 ... 3072, then raw pages
#define S4D_RAW_OVER 3072    // compressed over 3/4 of a page: stored raw
#define S4D_NCLASS (S4D_RAW_OVER / S4D_CLASS_STEP + 1)

// Slot kinds (the low bits of a slot's meta word).
enum { S4D_EMPTY = 0, S4D_ZERO = 1, S4D_SAME = 2, S4D_LZ4 = 3, S4D_RAW = 4, S4D_LOST = 5, S4D_FILE = 6 };

// s4d_store_read's answer for a block written back to the store's file
// (writeback.c): the caller reads it from there (s4d_store_file).
#define S4D_IN_FILE 1

// Where a written-back block lies: the page at off of fd, and its hash.
struct s4d_fref {
	int fd;
	uint32_t hash;
	uint64_t off;
};

// A slot: one per block, 16 bytes. obj is the object's address (LZ4, RAW),
// the repeated 8-byte word (SAME) or the page's offset in the file (FILE).
// meta: bits 0-2 kind, bit 3 the slot's lock, bits 4-16 the compressed
// size, bit 17 young (written since the writeback's hand last passed),
// bits 32-63 the page's hash.
struct s4d_slot {
	_Atomic uint64_t obj;
	_Atomic uint64_t meta;
};

struct s4d_slab {  // at the start of a slab, within S4D_SLAB_HDR bytes
	struct s4d_slab *next, *prev;  // the class's partial list, or the empty stack
	uint16_t cls, inuse, cap, free;  // free: index of the first free object, cap when none
	uint32_t magic;
};

struct s4d_class {
	atomic_flag lock;
	uint32_t size;
	struct s4d_slab *partial;  // slabs with a free object
	uint64_t slabs;            // slabs held (partial or full)
};

struct s4d_stats {  // counters, read by Go at any time
	_Atomic uint64_t pages, zero, same, raw, lz4, compr_bytes, slab_bytes;
	_Atomic uint64_t writes, reads, discards, nomem, bad_hash, lost_reads, wakes;
	_Atomic uint64_t ring_low;  // fewest slabs the ring held after a write took one (+1; 0: none taken yet)
	// Writeback (writeback.c): pages in the file now, read from it, written to it.
	_Atomic uint64_t file_pages, file_reads, file_writes;
};

struct s4d_store {
	uint64_t blocks;
	struct s4d_slot *slots;
	struct s4d_class cls[S4D_NCLASS];
	// Slabs handed in by the refill (refill.c): a ring with one producer and
	// many consumers (the queue threads); entries are slab addresses.
	uint64_t *ring;
	uint32_t ring_cap;  // a power of two
	_Atomic uint64_t head, tail;
	_Atomic uint64_t low;  // fewer slabs than this in the ring: wake the refill (it sets it)
	// Slabs emptied by frees, reused first; Go takes the surplus back.
	atomic_flag empty_lock;
	struct s4d_slab *empty;
	uint64_t nempty;
	int efd;                     // eventfd that wakes the refill; -1: none
	_Atomic int wake_pending;    // a wake written and not yet read
	// Emptying after swapoff (s4d_store_empty) fences writes off: one
	// that finds the fence up fails (-EAGAIN: the kernel keeps the page);
	// writers counts those inside, for the emptier to wait out.
	_Atomic int fence, writers;
	int wb_fd;  // the writeback's file (O_DIRECT); -1: none
	struct s4d_stats st;
};

// Set up and torn down by Go (no allocation here: Go maps the memory).
void s4d_store_init(struct s4d_store *s, struct s4d_slot *slots, uint64_t blocks, uint64_t *ring, uint32_t ring_cap, int efd);

// The I/O path. scratch: S4D_PAGE bytes of the caller's own (a queue
// thread's). Return 0 or a negative errno: -ENOMEM (no free slab: the
// refill is woken, the kernel keeps the page), -EIO (a lost block or a
// hash that does not match), -EINVAL (past the end).
int s4d_store_write(struct s4d_store *s, uint64_t block, const void *page, void *scratch);
int s4d_store_read(struct s4d_store *s, uint64_t block, void *page);  // or S4D_IN_FILE
int s4d_store_file(struct s4d_store *s, uint64_t block, struct s4d_fref *ref);  // 0 or -EIO
void s4d_store_discard(struct s4d_store *s, uint64_t block, uint64_t n);

// The control plane (Go). Each is quick and takes only the store's own
// spin locks, never held across anything that could wait.
uint64_t s4d_store_ring_free(struct s4d_store *s);  // slabs waiting in the ring
int s4d_store_room(struct s4d_store *s);            // a slab waits in the ring or among the emptied: a write may succeed
int s4d_store_push(struct s4d_store *s, void *slab);  // 0, or -1 when the ring is full
void *s4d_store_take_empty(struct s4d_store *s);       // an emptied slab, or NULL
void *s4d_store_ring_take(struct s4d_store *s);        // a slab back from the ring (a reserve that shrank), or NULL
void s4d_store_mark_lost(struct s4d_store *s);
// For persist and takeover (Go, with the queues stopped or not yet
// started): a block's kind (or -EINVAL), one block made lost.
int s4d_store_kind(struct s4d_store *s, uint64_t block);
void s4d_store_lose(struct s4d_store *s, uint64_t block);
// Empties the store, block 0 kept unless keep0 is 0 or it is lost, if no
// write began since the store's write count was writes_seen (0), else
// leaves it as it is (-EBUSY): a swapon right after the swapoff that the
// caller saw may have written pages in use.
int s4d_store_empty(struct s4d_store *s, uint64_t writes_seen, int keep0);
// Fails every write from now on (-EAGAIN), once those inside are done:
// reads go on being served while the pages are copied for a persist.
void s4d_store_fence(struct s4d_store *s);
// Writeback (writeback.c's thread, never the I/O path): pick copies up
// to max cold pages (LZ4 or raw, not young; young ones are made old as the
// hand passes) from *hand on, scanning at most scan slots, into pages
// (decompressed), with their blocks and tokens; commit makes one of them
// FILE if the slot still holds what was picked (1), else leaves it (0).
int s4d_store_wb_pick(struct s4d_store *s, uint64_t *hand, uint64_t scan, uint64_t *blocks, uint64_t *tokens, char *pages, int max);
int s4d_store_wb_commit(struct s4d_store *s, uint64_t block, uint64_t token);
void *s4d_store_object(struct s4d_store *s, uint64_t block);  // LZ4 or raw object, else NULL (tests)          // every empty block reads as EIO (after a crash)

// LZ4 from the system's liblz4.so.1, loaded at run time (dlopen):
// NULL when loaded, else why not.
const char *s4d_lz4_load(void);
uint32_t s4d_hash(const void *page);

#endif
