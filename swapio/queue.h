// The ublk queue threads of the native swap path: see doc.go.
#ifndef S4D_SWAPIO_QUEUE_H
#define S4D_SWAPIO_QUEUE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "store.h"

struct s4d_qstats {
	_Atomic uint64_t requests, waits, reads, read_pages, writes, write_pages, discards, errors, nomem;
	_Atomic uint64_t held, held_failed;  // writes held for want of a slab; of those, failed at the bound
};

// A write held for want of a slab (queue.c): its tag, the pages of it
// stored so far, and the timer tick it was held at.
struct s4d_held { uint16_t tag, done; uint32_t since; };

// A read with pages in the store's file (writeback.c): the file reads in
// flight, the pages they fill and those pages' hashes, checked when the
// last is done, and the result so far.
#define S4D_IO_PAGES 8  // pages a request has at most (the native path's max_io: 32 KiB)
struct s4d_fread { uint32_t pend, mask; int32_t res; uint32_t hash[S4D_IO_PAGES]; };

// s4d_ops is the store a queue serves from: s4d_store_* by default;
// tests/guest/nullublk plugs in the cheapest store that gives pages back
// (the floor a swap-in through ublk can reach). A function is called
// from queue threads only, several at once.
struct s4d_ops {
	int (*read)(void *store, uint64_t block, void *page);
	int (*write)(void *store, uint64_t block, const void *page, void *scratch);
	void (*discard)(void *store, uint64_t block, uint64_t n);
	// room says whether a write may now find memory; NULL: a store whose
	// writes never wait for memory (a write it refuses fails at once).
	int (*room)(void *store);
	// file says where a block that read answered S4D_IN_FILE lies; NULL:
	// a store that keeps every page in memory.
	int (*file)(void *store, uint64_t block, struct s4d_fref *ref);
};

struct s4d_queue {
	// Set by Go before s4d_queue_start; the memory is Go's, mapped and
	// locked outside the Go heap.
	void *store;
	struct s4d_ops ops;
	uint64_t cpus[16];    // the CPUs the thread runs on (a cpu_set_t: the queue's affinity); none set: any
	int cdev;             // /dev/ublkcN
	uint16_t qid, depth;
	uint32_t max_io;
	const void *descs;    // the kernel's I/O descriptors (mmap of cdev)
	char *bufs;           // depth buffers of max_io bytes
	char *scratch;        // S4D_PAGE bytes for the compressor
	void *stack;          // the thread's stack, locked
	size_t stack_len;
	int plain_ring;       // 1: no COOP/DEFER_TASKRUN flags
	uint32_t hold_ticks;  // a write refused -ENOMEM is held this many ticks (queue.c) before it fails
	struct s4d_fread *fr; // depth entries where ops.file is set; NULL: no file

	// The thread's state, read by Go.
	_Atomic int ready;    // 0 starting, 1 serving, <0 -errno: setup failed
	_Atomic int detach;   // Go: answer nothing more (the device is left to the next daemon)
	_Atomic int busy;     // a request is being served
	_Atomic int done;     // the thread has ended
	int err;              // why it ended: 0 after the kernel aborted every tag
	int flusher_err;      // errno of PR_SET_IO_FLUSHER (0: the thread is an I/O flusher)
	uint32_t ring_flags;
	pthread_t th;
	struct s4d_qstats st;
	struct s4d_held held[];  // depth entries: Go maps them after the struct
};

int s4d_queue_start(struct s4d_queue *q);
void s4d_store_ops(struct s4d_ops *o);      // the s4d store's  // 0 or -errno; the thread reports through ready
void s4d_queue_join(struct s4d_queue *q);

#endif
