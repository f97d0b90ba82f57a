// The store's refill (refill.c): a C thread that keeps the ring of slabs
// at the reserve.
#ifndef S4D_SWAPIO_REFILL_H
#define S4D_SWAPIO_REFILL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "store.h"

#define S4D_REGION_SLABS 16  // slabs per mapped region (1 MiB)

// A region of arena memory: slab i is idle (mapped, not locked, in no
// one's hands) while bit i of idle is set.
struct s4d_region {
	uintptr_t addr;
	uint64_t idle;
};

struct s4d_refill {
	// Set by Go before the first fill; the memory is Go's, mapped and locked.
	struct s4d_store *s;
	struct s4d_region *regions;
	uint32_t cap;              // regions the array holds: the arena's bound
	uint64_t base, max;        // the reserve asked for and its ceiling, in slabs
	_Atomic int64_t shrink_after_ns;  // a grown reserve halves after this long without a refused write
	void *stack;               // the thread's stack, locked
	size_t stack_len;

	// The thread's state, read by Go.
	_Atomic uint64_t want;     // slabs the ring is kept at now
	_Atomic uint32_t nregions;
	_Atomic int quit, paused, filling;
	_Atomic int err;           // errno of the last failed map or lock (0: none since)
	_Atomic uint64_t fails;    // fills that stopped short for it
	int rt;                    // 1: real-time (SCHED_FIFO); else the errno refusing it
	int flusher_err;           // errno of PR_SET_IO_FLUSHER (0: it is one)
	uint64_t last_nomem;
	int64_t last_grow_ns;
	pthread_t th;
};

int s4d_refill_fill(struct s4d_refill *r);   // one pass: 0, or -errno (the ring stopped short)
int s4d_refill_start(struct s4d_refill *r);  // 0, or -errno of pthread_create
void s4d_refill_stop(struct s4d_refill *r);  // ends the thread and waits for it
void s4d_refill_pause(struct s4d_refill *r, int on);  // tests: no slab handed in while on
void s4d_refill_unmap(struct s4d_refill *r); // unmaps every region (the store is done with them)

#endif
