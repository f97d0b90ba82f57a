// The store's writeback (writeback.c): a C thread that moves cold pages
// from RAM to a file while the store holds more than its limit.
#ifndef S4D_SWAPIO_WRITEBACK_H
#define S4D_SWAPIO_WRITEBACK_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "store.h"

#define S4D_WB_BATCH 64  // pages picked, written and committed at a time

struct s4d_wb {
	// Set by Go before start; the memory is Go's, mapped and locked.
	struct s4d_store *s;
	int fd;               // the file, O_DIRECT, as large as the device
	char *pages;          // S4D_WB_BATCH pages, page-aligned
	uint64_t blocks[S4D_WB_BATCH], tokens[S4D_WB_BATCH];
	void *stack;
	size_t stack_len;
	_Atomic uint64_t limit;  // compressed bytes kept in RAM; past it, cold pages go to the file

	// The thread's state, read by Go.
	_Atomic int quit;
	_Atomic int err;         // errno of the last failed write (0: none since)
	_Atomic uint64_t fails;  // writes to the file that failed
	_Atomic uint64_t passes; // batches done (tests wait on it)
	uint64_t hand;           // the next slot the scan looks at
	pthread_t th;
};

int s4d_wb_start(struct s4d_wb *w);  // 0, or -errno of pthread_create
void s4d_wb_stop(struct s4d_wb *w);  // ends the thread and waits for it
int s4d_wb_once(struct s4d_wb *w);   // one batch: pages moved, or -errno (tests, and the thread)

#endif
