// The cheapest store that gives this workload's pages back right (see
// main.go), served by the same C queue threads as s4d's swap (package
// swapio): a swap-in through it costs ublk's round trip and two small
// copies. Everything is mapped, populated and locked at start; a write
// takes no memory it has not.
#include "store.h"

#include <errno.h>
#include <string.h>
#include <sys/mman.h>

#define BLOCK 4096
#define HEAD 512
#define PERIOD 64
#define SMALL (HEAD + PERIOD)
#define FULL_BIT 0x80000000u

static void *map_locked(size_t n) {
	void *p = mmap(0, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE | MAP_LOCKED, -1, 0);
	return p == MAP_FAILED ? NULL : p;
}

int null_init(struct null_store *s, uint64_t blocks, uint32_t full) {
	memset(s, 0, sizeof *s);
	s->blocks = blocks;
	s->nfull = full;
	s->where = map_locked(blocks * sizeof *s->where);
	s->small = map_locked(blocks * SMALL);  // a repeating page's room for every block
	s->full = map_locked((size_t)full * BLOCK);
	s->free = map_locked((size_t)full * sizeof *s->free);
	if (!s->where || !s->small || !s->full || !s->free) return -ENOMEM;
	for (uint32_t i = 0; i < full; i++) s->free[i] = full - 1 - i;
	s->nfree = full;
	pthread_mutex_init(&s->mu, NULL);
	return 0;
}

// drop frees block's whole slot, if it has one; mu is held.
static void drop(struct null_store *s, uint64_t block) {
	uint32_t w = s->where[block];
	if (w & FULL_BIT) s->free[s->nfree++] = w & ~FULL_BIT;
	s->where[block] = 0;
}

int null_write(void *p, uint64_t block, const void *page, void *scratch) {
	(void)scratch;
	struct null_store *s = p;
	const unsigned char *b = page;
	if (block >= s->blocks) return -EINVAL;
	pthread_mutex_lock(&s->mu);
	drop(s, block);
	if (!memcmp(b + HEAD + PERIOD, b + HEAD, BLOCK - HEAD - PERIOD)) {
		memcpy(s->small + block * SMALL, b, SMALL);
		s->where[block] = 1;
		pthread_mutex_unlock(&s->mu);
		return 0;
	}
	if (!s->nfree) {
		s->refused++;
		pthread_mutex_unlock(&s->mu);
		return -ENOSPC;
	}
	uint32_t n = s->free[--s->nfree];
	s->where[block] = n | FULL_BIT;
	memcpy(s->full + (size_t)n * BLOCK, b, BLOCK);
	pthread_mutex_unlock(&s->mu);
	return 0;
}

int null_read(void *p, uint64_t block, void *page) {
	struct null_store *s = p;
	unsigned char *d = page;
	if (block >= s->blocks) return -EINVAL;
	pthread_mutex_lock(&s->mu);
	uint32_t w = s->where[block];
	if (w & FULL_BIT) {
		memcpy(d, s->full + (size_t)(w & ~FULL_BIT) * BLOCK, BLOCK);
	} else if (w) {
		memcpy(d, s->small + block * SMALL, SMALL);
		for (int off = SMALL; off < BLOCK; off += PERIOD) memcpy(d + off, d + HEAD, PERIOD);
	} else {
		memset(d, 0, BLOCK);  // never written
	}
	pthread_mutex_unlock(&s->mu);
	return 0;
}

void null_discard(void *p, uint64_t block, uint64_t n) {
	struct null_store *s = p;
	pthread_mutex_lock(&s->mu);
	for (uint64_t i = block; i < block + n && i < s->blocks; i++) drop(s, i);
	pthread_mutex_unlock(&s->mu);
}
