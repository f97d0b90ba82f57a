// nullublk's store: see store.c.
#ifndef NULLUBLK_STORE_H
#define NULLUBLK_STORE_H

#include <pthread.h>
#include <stdint.h>

struct null_store {
	pthread_mutex_t mu;   // queue threads of several CPUs share it
	uint64_t blocks;
	uint32_t *where;      // per block: 0 none, 1 its repeating slot, FULL_BIT|n whole slot n
	unsigned char *small; // blocks x (head + period) bytes
	unsigned char *full;  // nfull whole pages
	uint32_t *free, nfree, nfull;
	uint64_t refused;     // writes refused: no whole slot left
};

int null_init(struct null_store *s, uint64_t blocks, uint32_t full);
int null_write(void *s, uint64_t block, const void *page, void *scratch);
int null_read(void *s, uint64_t block, void *page);
void null_discard(void *s, uint64_t block, uint64_t n);

#endif
