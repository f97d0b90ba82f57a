// The native swap store: see store.h. Nothing here allocates, takes a
// lock a Go thread can hold while waiting, calls into Go, or makes a
// system call but the eventfd write that wakes the refill.
// No switch compiled to a table in .rodata: LockCode locks this code's
// pages, not the program's read-only data (on tmpfs it could swap).
#pragma GCC optimize("no-jump-tables")
#include "store.h"

#include <dlfcn.h>
#include <errno.h>
#include <string.h>
#include <unistd.h>

#define KIND_MASK 7ull
#define LOCK_BIT 8ull
#define SIZE_SHIFT 4
#define SIZE_MASK 0x1fffull
#define YOUNG_BIT (1ull << 17)
#define HASH_SHIFT 32
#define SLAB_MAGIC 0x53344453u  // "S4DS"

typedef int (*lz4_compress_fn)(const char *, char *, int, int);
typedef int (*lz4_decompress_fn)(const char *, char *, int, int);
static lz4_compress_fn lz4_compress;
static lz4_decompress_fn lz4_decompress;

const char *s4d_lz4_load(void) {
	if (lz4_compress && lz4_decompress) return NULL;
	void *h = dlopen("liblz4.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!h) return "liblz4.so.1 not found (install liblz4-1)";
	lz4_compress = (lz4_compress_fn)dlsym(h, "LZ4_compress_default");
	lz4_decompress = (lz4_decompress_fn)dlsym(h, "LZ4_decompress_safe");
	if (!lz4_compress || !lz4_decompress) return "liblz4.so.1 lacks LZ4_compress_default or LZ4_decompress_safe";
	return NULL;
}

// A 32-bit hash of a page's words (not cryptographic: it catches a page
// that comes back different, from a bug or a flipped bit).
uint32_t s4d_hash(const void *page) {
	const uint64_t *w = page;
	uint64_t a = 0x9e3779b97f4a7c15ull, b = 0xc2b2ae3d27d4eb4full;
	for (int i = 0; i < S4D_PAGE / 8; i += 2) {
		a = (a ^ w[i]) * 0x100000001b3ull;
		b = (b ^ w[i + 1]) * 0xff51afd7ed558ccdull;
		a ^= a >> 29;
		b ^= b >> 31;
	}
	a ^= b * 0x9e3779b97f4a7c15ull;
	return (uint32_t)(a ^ (a >> 32));
}

static inline void spin_lock(atomic_flag *f) {
	while (atomic_flag_test_and_set_explicit(f, memory_order_acquire)) __builtin_ia32_pause();
}
static inline void spin_unlock(atomic_flag *f) { atomic_flag_clear_explicit(f, memory_order_release); }

// The slot's lock: a bit of its meta word, so the table stays 16 bytes a
// block. Two queues rarely touch one block at once (the kernel's swap
// slot has its own lock); this keeps a discard and a write apart.
static uint64_t slot_lock(struct s4d_slot *sl) {
	for (;;) {
		uint64_t m = atomic_load_explicit(&sl->meta, memory_order_relaxed);
		if (!(m & LOCK_BIT) &&
		    atomic_compare_exchange_weak_explicit(&sl->meta, &m, m | LOCK_BIT, memory_order_acquire, memory_order_relaxed))
			return m;
		__builtin_ia32_pause();
	}
}
static void slot_unlock(struct s4d_slot *sl, uint64_t meta) {
	atomic_store_explicit(&sl->meta, meta & ~LOCK_BIT, memory_order_release);
}

void s4d_store_init(struct s4d_store *s, struct s4d_slot *slots, uint64_t blocks, uint64_t *ring, uint32_t ring_cap, int efd) {
	memset(s, 0, sizeof *s);
	s->slots = slots;
	s->blocks = blocks;
	s->ring = ring;
	s->ring_cap = ring_cap;
	s->efd = efd;
	s->wb_fd = -1;
	atomic_flag_clear(&s->empty_lock);
	for (int i = 0; i < S4D_NCLASS; i++) {
		atomic_flag_clear(&s->cls[i].lock);
		s->cls[i].size = i == S4D_NCLASS - 1 ? S4D_PAGE : (uint32_t)(i + 1) * S4D_CLASS_STEP;
	}
}

static void wake_refill(struct s4d_store *s) {
	if (s->efd < 0 || atomic_exchange(&s->wake_pending, 1)) return;
	uint64_t one = 1;
	atomic_fetch_add(&s->st.wakes, 1);
	(void)!write(s->efd, &one, sizeof one);
}

uint64_t s4d_store_ring_free(struct s4d_store *s) { return atomic_load(&s->tail) - atomic_load(&s->head); }

int s4d_store_room(struct s4d_store *s) {
	return s4d_store_ring_free(s) > 0 || __atomic_load_n(&s->nempty, __ATOMIC_RELAXED) > 0;
}

int s4d_store_push(struct s4d_store *s, void *slab) {
	uint64_t t = atomic_load_explicit(&s->tail, memory_order_relaxed);
	if (t - atomic_load_explicit(&s->head, memory_order_acquire) >= s->ring_cap) return -1;
	s->ring[t & (s->ring_cap - 1)] = (uint64_t)(uintptr_t)slab;
	atomic_store_explicit(&s->tail, t + 1, memory_order_release);
	return 0;
}

// ring_pop takes a slab Go handed in. The entry is read before the head
// moves past it: the producer writes a slot only once the head is past.
static struct s4d_slab *ring_pop(struct s4d_store *s) {
	uint64_t h = atomic_load_explicit(&s->head, memory_order_relaxed);
	for (;;) {
		if (h == atomic_load_explicit(&s->tail, memory_order_acquire)) return NULL;
		uint64_t v = s->ring[h & (s->ring_cap - 1)];
		if (atomic_compare_exchange_weak_explicit(&s->head, &h, h + 1, memory_order_acq_rel, memory_order_relaxed))
			return (struct s4d_slab *)(uintptr_t)v;
	}
}

void *s4d_store_ring_take(struct s4d_store *s) {
	struct s4d_slab *sb = ring_pop(s);
	return sb;
}

void *s4d_store_take_empty(struct s4d_store *s) {
	spin_lock(&s->empty_lock);
	struct s4d_slab *sb = s->empty;
	if (sb) {
		s->empty = sb->next;
		s->nempty--;
	}
	spin_unlock(&s->empty_lock);
	if (sb) atomic_fetch_sub(&s->st.slab_bytes, S4D_SLAB);
	return sb;
}

static struct s4d_slab *new_slab(struct s4d_store *s, int c) {
	spin_lock(&s->empty_lock);
	struct s4d_slab *sb = s->empty;
	if (sb) {
		s->empty = sb->next;
		s->nempty--;
	}
	spin_unlock(&s->empty_lock);
	if (!sb) {
		sb = ring_pop(s);
		if (!sb) return NULL;
		atomic_fetch_add(&s->st.slab_bytes, S4D_SLAB);
		// How close writes came to an empty ring: what sizes the reserve.
		uint64_t left = s4d_store_ring_free(s) + 1, low = atomic_load_explicit(&s->st.ring_low, memory_order_relaxed);
		if (!low || left < low) atomic_store_explicit(&s->st.ring_low, left, memory_order_relaxed);
	}
	uint32_t size = s->cls[c].size;
	sb->cls = (uint16_t)c;
	sb->inuse = 0;
	sb->cap = (uint16_t)((S4D_SLAB - S4D_SLAB_HDR) / size);
	sb->magic = SLAB_MAGIC;
	sb->next = sb->prev = NULL;
	// Free objects are chained by index in their first two bytes.
	char *base = (char *)sb + S4D_SLAB_HDR;
	for (uint16_t i = 0; i < sb->cap; i++) *(uint16_t *)(base + (size_t)i * size) = (uint16_t)(i + 1);
	sb->free = 0;
	return sb;
}

static void list_del(struct s4d_class *k, struct s4d_slab *sb) {
	if (sb->prev) sb->prev->next = sb->next;
	else k->partial = sb->next;
	if (sb->next) sb->next->prev = sb->prev;
	sb->next = sb->prev = NULL;
}
static void list_add(struct s4d_class *k, struct s4d_slab *sb) {
	sb->prev = NULL;
	sb->next = k->partial;
	if (k->partial) k->partial->prev = sb;
	k->partial = sb;
}

// obj_alloc returns room for an object of class c, or NULL when no slab
// is free (the refill is woken).
static char *obj_alloc(struct s4d_store *s, int c) {
	struct s4d_class *k = &s->cls[c];
	spin_lock(&k->lock);
	struct s4d_slab *sb = k->partial;
	if (!sb) {
		sb = new_slab(s, c);
		if (!sb) {
			spin_unlock(&k->lock);
			return NULL;
		}
		k->slabs++;
		list_add(k, sb);
	}
	char *o = (char *)sb + S4D_SLAB_HDR + (size_t)sb->free * k->size;
	sb->free = *(uint16_t *)o;
	if (++sb->inuse == sb->cap) list_del(k, sb);
	spin_unlock(&k->lock);
	// Below the low mark left in the ring (fill sets it, seven eighths of
	// the reserve): refill now, while the rest lets writes go on freeing
	// memory for the refill to take.
	if (s4d_store_ring_free(s) < atomic_load_explicit(&s->low, memory_order_relaxed)) wake_refill(s);
	return o;
}

static void obj_free(struct s4d_store *s, char *o) {
	struct s4d_slab *sb = (struct s4d_slab *)((uintptr_t)o & ~(uintptr_t)(S4D_SLAB - 1));
	struct s4d_class *k = &s->cls[sb->cls];
	spin_lock(&k->lock);
	uint16_t i = (uint16_t)((o - ((char *)sb + S4D_SLAB_HDR)) / k->size);
	*(uint16_t *)o = sb->free;
	sb->free = i;
	if (sb->inuse-- == sb->cap) list_add(k, sb);
	int gone = sb->inuse == 0;
	if (gone) {
		list_del(k, sb);
		k->slabs--;
		sb->magic = 0;
	}
	spin_unlock(&k->lock);
	if (gone) {
		spin_lock(&s->empty_lock);
		sb->next = s->empty;
		s->empty = sb;
		s->nempty++;
		spin_unlock(&s->empty_lock);
	}
}

// drop frees what a locked slot holds and returns its meta emptied.
static uint64_t drop(struct s4d_store *s, struct s4d_slot *sl, uint64_t m) {
	uint64_t kind = m & KIND_MASK;
	if (kind == S4D_LZ4 || kind == S4D_RAW) {
		uint64_t size = (m >> SIZE_SHIFT) & SIZE_MASK;
		obj_free(s, (char *)(uintptr_t)atomic_load_explicit(&sl->obj, memory_order_relaxed));
		atomic_fetch_sub(&s->st.compr_bytes, size);
		atomic_fetch_sub(kind == S4D_LZ4 ? &s->st.lz4 : &s->st.raw, 1);
	} else if (kind == S4D_ZERO) {
		atomic_fetch_sub(&s->st.zero, 1);
	} else if (kind == S4D_SAME) {
		atomic_fetch_sub(&s->st.same, 1);
	} else if (kind == S4D_FILE) {
		atomic_fetch_sub(&s->st.file_pages, 1);  // its place in the file is overwritten if it comes back
	}
	if (kind != S4D_EMPTY && kind != S4D_LOST) atomic_fetch_sub(&s->st.pages, 1);
	return S4D_EMPTY;
}

static int store_write(struct s4d_store *s, uint64_t block, const void *page, void *scratch) {
	const uint64_t *w = page;
	uint64_t v = w[0];
	int same = 1;
	for (int i = 1; i < S4D_PAGE / 8; i++)
		if (w[i] != v) {
			same = 0;
			break;
		}
	uint64_t kind, size = 0, hash = 0, obj = v;
	char *o = NULL;
	if (same) {
		kind = v == 0 ? S4D_ZERO : S4D_SAME;
	} else {
		hash = s4d_hash(page);
		int n = lz4_compress(page, scratch, S4D_PAGE, S4D_RAW_OVER);
		const void *src = scratch;
		int c;
		if (n > 0) {
			kind = S4D_LZ4, size = (uint64_t)n, c = (n - 1) / S4D_CLASS_STEP;
		} else {
			kind = S4D_RAW, size = S4D_PAGE, c = S4D_NCLASS - 1, src = page;
		}
		// The object is taken before the slot's old one is freed: a write
		// that finds no room leaves the block as it was.
		if (!(o = obj_alloc(s, c))) {
			atomic_fetch_add(&s->st.nomem, 1);
			wake_refill(s);
			return -ENOMEM;
		}
		memcpy(o, src, size);
		obj = (uint64_t)(uintptr_t)o;
	}
	struct s4d_slot *sl = &s->slots[block];
	uint64_t m = slot_lock(sl);
	drop(s, sl, m);
	atomic_store_explicit(&sl->obj, obj, memory_order_relaxed);
	slot_unlock(sl, kind | size << SIZE_SHIFT | hash << HASH_SHIFT | YOUNG_BIT);
	atomic_fetch_add(&s->st.pages, 1);
	atomic_fetch_add(kind == S4D_ZERO ? &s->st.zero : kind == S4D_SAME ? &s->st.same : kind == S4D_LZ4 ? &s->st.lz4 : &s->st.raw, 1);
	if (size) atomic_fetch_add(&s->st.compr_bytes, size);
	return 0;
}

int s4d_store_write(struct s4d_store *s, uint64_t block, const void *page, void *scratch) {
	if (block >= s->blocks) return -EINVAL;
	// Sequentially consistent, with the emptier's fence: either it sees
	// this write (counted, or inside) or this write sees the fence.
	atomic_fetch_add(&s->writers, 1);
	atomic_fetch_add(&s->st.writes, 1);
	int r = atomic_load(&s->fence) ? -EAGAIN : store_write(s, block, page, scratch);
	atomic_fetch_sub(&s->writers, 1);
	return r;
}

int s4d_store_read(struct s4d_store *s, uint64_t block, void *page) {
	if (block >= s->blocks) return -EINVAL;
	atomic_fetch_add_explicit(&s->st.reads, 1, memory_order_relaxed);
	struct s4d_slot *sl = &s->slots[block];
	uint64_t m = slot_lock(sl);
	uint64_t kind = m & KIND_MASK, v = atomic_load_explicit(&sl->obj, memory_order_relaxed);
	int err = 0;
	switch (kind) {
	case S4D_EMPTY:
	case S4D_ZERO:
		memset(page, 0, S4D_PAGE);
		break;
	case S4D_SAME:
		for (int i = 0; i < S4D_PAGE / 8; i++) ((uint64_t *)page)[i] = v;
		break;
	case S4D_LOST:
		err = -EIO;
		atomic_fetch_add(&s->st.lost_reads, 1);
		break;
	case S4D_FILE:
		err = S4D_IN_FILE;
		break;
	default: {
		int size = (int)((m >> SIZE_SHIFT) & SIZE_MASK);
		const char *o = (const char *)(uintptr_t)v;
		if (kind == S4D_RAW) memcpy(page, o, S4D_PAGE);
		else if (lz4_decompress(o, page, size, S4D_PAGE) != S4D_PAGE) err = -EIO;
		if (!err && s4d_hash(page) != (uint32_t)(m >> HASH_SHIFT)) err = -EIO;
		if (err) atomic_fetch_add(&s->st.bad_hash, 1);
	}
	}
	slot_unlock(sl, m);
	return err;
}

// s4d_store_file says where a block that read answered S4D_IN_FILE lies.
// The kernel neither writes nor discards a swap slot while it reads it,
// so the answer holds until the read is done.
int s4d_store_file(struct s4d_store *s, uint64_t block, struct s4d_fref *ref) {
	if (block >= s->blocks) return -EINVAL;
	struct s4d_slot *sl = &s->slots[block];
	uint64_t m = atomic_load(&sl->meta);
	if ((m & KIND_MASK) != S4D_FILE || s->wb_fd < 0) return -EIO;
	ref->fd = s->wb_fd;
	ref->hash = (uint32_t)(m >> HASH_SHIFT);
	ref->off = atomic_load(&sl->obj);
	atomic_fetch_add_explicit(&s->st.file_reads, 1, memory_order_relaxed);
	return 0;
}

int s4d_store_wb_pick(struct s4d_store *s, uint64_t *hand, uint64_t scan, uint64_t *blocks, uint64_t *tokens, char *pages, int max) {
	int n = 0;
	uint64_t b = *hand;
	for (uint64_t i = 0; i < scan && n < max; i++, b++) {
		if (b >= s->blocks) b = 0;
		struct s4d_slot *sl = &s->slots[b];
		uint64_t k = atomic_load_explicit(&sl->meta, memory_order_relaxed) & KIND_MASK;
		if (k != S4D_LZ4 && k != S4D_RAW) continue;
		uint64_t m = slot_lock(sl);
		k = m & KIND_MASK;
		if ((k != S4D_LZ4 && k != S4D_RAW) || (m & YOUNG_BIT)) {
			slot_unlock(sl, m & ~YOUNG_BIT);  // a second chance: old when the hand comes round again
			continue;
		}
		// Copied out under the slot's lock, decoded after it: a queue
		// reading the block waits for a copy, not a decode.
		uint64_t v = atomic_load_explicit(&sl->obj, memory_order_relaxed);
		int size = (int)((m >> SIZE_SHIFT) & SIZE_MASK);
		char *dst = pages + (size_t)n * S4D_PAGE;
		char tmp[S4D_RAW_OVER];
		memcpy(k == S4D_RAW ? dst : tmp, (const char *)(uintptr_t)v, (size_t)size);
		slot_unlock(sl, m);
		if (k == S4D_LZ4 && lz4_decompress(tmp, dst, size, S4D_PAGE) != S4D_PAGE) continue;
		if (s4d_hash(dst) != (uint32_t)(m >> HASH_SHIFT)) continue;  // a bad page stays where its read fails
		blocks[n] = b;
		tokens[n] = v;
		n++;
	}
	*hand = b;
	return n;
}

int s4d_store_wb_commit(struct s4d_store *s, uint64_t block, uint64_t token) {
	struct s4d_slot *sl = &s->slots[block];
	uint64_t m = slot_lock(sl), k = m & KIND_MASK;
	// Written again since the pick: young (only the writeback's hand makes
	// a slot old), so an object at the same address is not mistaken for it.
	if ((k != S4D_LZ4 && k != S4D_RAW) || (m & YOUNG_BIT) || atomic_load_explicit(&sl->obj, memory_order_relaxed) != token) {
		slot_unlock(sl, m);
		return 0;
	}
	drop(s, sl, m);
	atomic_store_explicit(&sl->obj, block * S4D_PAGE, memory_order_relaxed);
	slot_unlock(sl, S4D_FILE | (m & (0xffffffffull << HASH_SHIFT)));
	atomic_fetch_add(&s->st.pages, 1);
	atomic_fetch_add(&s->st.file_pages, 1);
	atomic_fetch_add(&s->st.file_writes, 1);
	return 1;
}

void s4d_store_discard(struct s4d_store *s, uint64_t block, uint64_t n) {
	for (uint64_t b = block; b < block + n && b < s->blocks; b++) {
		struct s4d_slot *sl = &s->slots[b];
		uint64_t m = slot_lock(sl);
		slot_unlock(sl, drop(s, sl, m));
		atomic_fetch_add_explicit(&s->st.discards, 1, memory_order_relaxed);
	}
}

void s4d_store_mark_lost(struct s4d_store *s) {
	for (uint64_t b = 0; b < s->blocks; b++) {
		struct s4d_slot *sl = &s->slots[b];
		uint64_t m = slot_lock(sl);
		slot_unlock(sl, (m & KIND_MASK) == S4D_EMPTY ? S4D_LOST : m);
	}
}

int s4d_store_kind(struct s4d_store *s, uint64_t block) {
	if (block >= s->blocks) return -EINVAL;
	return (int)(atomic_load(&s->slots[block].meta) & KIND_MASK);
}

void s4d_store_lose(struct s4d_store *s, uint64_t block) {
	if (block >= s->blocks) return;
	struct s4d_slot *sl = &s->slots[block];
	uint64_t m = slot_lock(sl);
	drop(s, sl, m);
	slot_unlock(sl, S4D_LOST);
}

void s4d_store_fence(struct s4d_store *s) {
	atomic_store(&s->fence, 1);
	while (atomic_load(&s->writers)) __builtin_ia32_pause();
}

int s4d_store_empty(struct s4d_store *s, uint64_t writes_seen, int keep0) {
	atomic_store(&s->fence, 1);
	while (atomic_load(&s->writers)) __builtin_ia32_pause();
	int r = -EBUSY;
	if (atomic_load(&s->st.writes) == writes_seen) {
		uint64_t first = keep0 && (atomic_load(&s->slots[0].meta) & KIND_MASK) != S4D_LOST ? 1 : 0;
		for (uint64_t b = first; b < s->blocks; b++) {
			struct s4d_slot *sl = &s->slots[b];
			if ((atomic_load_explicit(&sl->meta, memory_order_relaxed) & KIND_MASK) == S4D_EMPTY) continue;
			uint64_t m = slot_lock(sl);
			slot_unlock(sl, drop(s, sl, m));
		}
		r = 0;
	}
	atomic_store(&s->fence, 0);
	return r;
}

void *s4d_store_object(struct s4d_store *s, uint64_t block) {
	if (block >= s->blocks) return NULL;
	uint64_t k = atomic_load(&s->slots[block].meta) & KIND_MASK;
	return k == S4D_LZ4 || k == S4D_RAW ? (void *)(uintptr_t)atomic_load(&s->slots[block].obj) : NULL;
}

void s4d_store_code(uintptr_t *lo, uintptr_t *hi) {
	uintptr_t fs[] = {(uintptr_t)s4d_hash, (uintptr_t)slot_lock, (uintptr_t)slot_unlock, (uintptr_t)wake_refill, (uintptr_t)s4d_store_room,
	                  (uintptr_t)ring_pop, (uintptr_t)new_slab, (uintptr_t)obj_alloc, (uintptr_t)obj_free, (uintptr_t)drop,
	                  (uintptr_t)s4d_store_write, (uintptr_t)store_write, (uintptr_t)s4d_store_fence, (uintptr_t)s4d_store_read, (uintptr_t)s4d_store_discard, (uintptr_t)s4d_store_file,
	                  (uintptr_t)s4d_store_init, (uintptr_t)s4d_store_push, (uintptr_t)s4d_store_take_empty};
	*lo = *hi = fs[0];
	for (unsigned i = 1; i < sizeof fs / sizeof fs[0]; i++) {
		if (fs[i] < *lo) *lo = fs[i];
		if (fs[i] > *hi) *hi = fs[i];
	}
}

int s4d_store_statics(uintptr_t *out) {
	out[0] = (uintptr_t)&lz4_compress;
	out[1] = (uintptr_t)&lz4_decompress;
	return 2;
}
