// The refill: a C thread that maps arena memory, locks it a slab at a
// time and hands the slabs to the store's ring, keeping the ring at the
// reserve; and gives back what a shrunk reserve or discards left over.
//
// It is C, like the queues, for the same reason: it is what ends a
// shortage. As a Go thread it touched memory the Go runtime keeps (its
// stack, the scheduler's, the heap) that could be on its way out to this
// very device; once writes were held for want of a slab, a fault on such
// a page waited for a write that waited for the refill. Here it touches
// only locked memory: its stack, the store, the region table.
//
// It runs real-time (SCHED_FIFO, the lowest priority) where it may: the
// kernel lets a real-time task's allocations go below the min watermark
// (ALLOC_MIN_RESERVE), as reclaim's own allocations may, and zram's
// allocations run in reclaim's context. Without it, with free memory at
// the watermark, the refill competed for pages on equal terms with the
// tasks whose swap-outs waited for it, and lost (1 GiB guest, 1 vCPU,
// 3 processes of twice its RAM: MemFree stuck at 48 MiB, the watermark
// that THP sets there).
#define _GNU_SOURCE
#include "refill.h"

#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#define REGION_LEN ((size_t)S4D_REGION_SLABS * S4D_SLAB)

static int64_t now_ns(void) {
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

// map_region maps a region aligned to a slab (a slab's header is found
// from an object's address); nothing is present yet.
static int map_region(struct s4d_refill *r) {
	uint32_t n = atomic_load(&r->nregions);
	if (n >= r->cap) return -ENOSPC;
	char *raw = mmap(0, REGION_LEN + S4D_SLAB, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (raw == MAP_FAILED) return -errno;
	uintptr_t base = (uintptr_t)raw, off = (S4D_SLAB - base % S4D_SLAB) % S4D_SLAB;
	if (off) munmap(raw, off);
	if (S4D_SLAB - off) munmap(raw + off + REGION_LEN, S4D_SLAB - off);
	r->regions[n] = (struct s4d_region){.addr = base + off, .idle = (1ull << S4D_REGION_SLABS) - 1};
	atomic_store(&r->nregions, n + 1);
	return 0;
}

// take finds an idle slab, mapping a region when none is: the newest
// regions first, so the oldest empty out when the reserve shrinks.
static void *take(struct s4d_refill *r, int *err) {
	for (;;) {
		uint32_t n = atomic_load(&r->nregions);
		for (uint32_t i = n; i-- > 0;) {
			struct s4d_region *g = &r->regions[i];
			if (g->idle) {
				int b = __builtin_ctzll(g->idle);
				g->idle &= ~(1ull << b);
				return (void *)(g->addr + (uintptr_t)b * S4D_SLAB);
			}
		}
		if ((*err = map_region(r))) return NULL;
	}
}

// put marks a slab idle again, its memory given back to the system (it
// stays mapped: reused first).
static void put(struct s4d_refill *r, void *p, int release) {
	if (release) {
		munlock(p, S4D_SLAB);
		madvise(p, S4D_SLAB, MADV_DONTNEED);
	}
	uintptr_t a = (uintptr_t)p;
	uint32_t n = atomic_load(&r->nregions);
	for (uint32_t i = 0; i < n; i++) {
		struct s4d_region *g = &r->regions[i];
		if (a >= g->addr && a < g->addr + REGION_LEN) {
			g->idle |= 1ull << ((a - g->addr) / S4D_SLAB);
			return;
		}
	}
}

int s4d_refill_fill(struct s4d_refill *r) {
	atomic_store(&r->filling, 1);
	if (atomic_load(&r->paused)) {
		atomic_store(&r->filling, 0);
		return 0;
	}
	struct s4d_store *s = r->s;
	uint64_t want = atomic_load(&r->want);
	// Woken once writes have taken an eighth: the ring stays nearly full,
	// so a burst finds most of the reserve there while the refill waits
	// for memory (at half, an 8 MiB reserve ran dry in the guest).
	uint64_t eighth = want / 8 ? want / 8 : 1;
	atomic_store(&s->low, want > eighth ? want - eighth : 0);
	int err = 0;
	while (s4d_store_ring_free(s) < want && !atomic_load(&r->paused)) {
		void *p = take(r, &err);
		if (!p) break;
		// Locking faults the slab in: this is where the refill may wait
		// for memory. A slab at a time, each handed in at once: every
		// slab in the ring stores the swap-outs that free the memory the
		// next one needs.
		if (mlock(p, S4D_SLAB)) {
			err = -errno;
			put(r, p, 1);
			break;
		}
		if (s4d_store_push(s, p)) {
			put(r, p, 1);
			break;
		}
	}
	// A reserve that shrank: the ring's surplus goes back. Slabs emptied
	// by discards and overwrites (reused first by writes) are kept while
	// the ring and they hold at most twice the reserve.
	while (s4d_store_ring_free(s) > want) {
		void *p = s4d_store_ring_take(s);
		if (!p) break;
		put(r, p, 1);
	}
	while (s4d_store_ring_free(s) + __atomic_load_n(&s->nempty, __ATOMIC_RELAXED) > 2 * want) {
		void *p = s4d_store_take_empty(s);
		if (!p) break;
		put(r, p, 1);
	}
	atomic_store(&r->filling, 0);
	if (err) {
		atomic_store(&r->err, -err);
		atomic_fetch_add(&r->fails, 1);
	}
	return err;
}

// policy sizes the reserve: doubled (to max) when writes found the ring
// empty since the last pass, halved (to base) after shrink_after_ns
// without.
static void policy(struct s4d_refill *r) {
	uint64_t n = atomic_load(&r->s->st.nomem), want = atomic_load(&r->want);
	int64_t now = now_ns();
	if (n != r->last_nomem) {
		r->last_nomem = n;
		r->last_grow_ns = now;
		if (want < r->max) atomic_store(&r->want, 2 * want < r->max ? 2 * want : r->max);
	} else if (want > r->base && now - r->last_grow_ns > r->shrink_after_ns) {
		atomic_store(&r->want, want / 2 > r->base ? want / 2 : r->base);
		r->last_grow_ns = now;
	}
}

static void *run(void *arg) {
	struct s4d_refill *r = arg;
	// An I/O flusher: its own reclaim does no I/O (no swap-out to the
	// device it refills).
	if (prctl(PR_SET_IO_FLUSHER, 1, 0, 0, 0)) r->flusher_err = errno;
	prctl(PR_SET_NAME, "s4d-refill", 0, 0, 0);
	struct pollfd pf = {.fd = r->s->efd, .events = POLLIN};
	uint64_t buf;
	while (!atomic_load(&r->quit)) {
		poll(&pf, 1, 100);
		(void)!read(r->s->efd, &buf, sizeof buf);
		atomic_store(&r->s->wake_pending, 0);
		policy(r);
		if (s4d_refill_fill(r)) {
			struct timespec ts = {0, 10000000};  // memory is short: the next try
			nanosleep(&ts, NULL);
		}
	}
	return NULL;
}

static int create(struct s4d_refill *r, int rt) {
	pthread_attr_t a;
	pthread_attr_init(&a);
	int e = r->stack ? pthread_attr_setstack(&a, r->stack, r->stack_len) : 0;
	// Every signal blocked: the Go runtime's handler would need an M of
	// its own on a thread it does not know.
	sigset_t all;
	sigfillset(&all);
	if (!e) e = pthread_attr_setsigmask_np(&a, &all);
	if (!e && rt) {
		struct sched_param sp = {.sched_priority = 1};
		e = pthread_attr_setinheritsched(&a, PTHREAD_EXPLICIT_SCHED);
		if (!e) e = pthread_attr_setschedpolicy(&a, SCHED_FIFO);
		if (!e) e = pthread_attr_setschedparam(&a, &sp);
	}
	if (!e) e = pthread_create(&r->th, &a, run, r);
	pthread_attr_destroy(&a);
	return e;
}

int s4d_refill_start(struct s4d_refill *r) {
	r->last_nomem = atomic_load(&r->s->st.nomem);
	r->last_grow_ns = now_ns();
	int e = create(r, 1);
	r->rt = e ? e : 1;
	if (e == EPERM) e = create(r, 0);  // not allowed real-time: a plain thread
	return -e;
}

void s4d_refill_stop(struct s4d_refill *r) {
	atomic_store(&r->quit, 1);
	uint64_t one = 1;
	(void)!write(r->s->efd, &one, sizeof one);
	pthread_join(r->th, NULL);
}

void s4d_refill_pause(struct s4d_refill *r, int on) {
	atomic_store(&r->paused, on);
	if (on) {
		// A pass that began before the flag was up ends before this returns.
		struct timespec ts = {0, 100000};
		while (atomic_load(&r->filling)) nanosleep(&ts, NULL);
	} else {
		uint64_t one = 1;
		(void)!write(r->s->efd, &one, sizeof one);
	}
}

void s4d_refill_unmap(struct s4d_refill *r) {
	uint32_t n = atomic_load(&r->nregions);
	for (uint32_t i = 0; i < n; i++) munmap((void *)r->regions[i].addr, REGION_LEN);
	atomic_store(&r->nregions, 0);
}

// s4d_refill_code gives the span of this file's functions, locked with
// the queues' (LockCode): on tmpfs the program's pages could swap.
void s4d_refill_code(uintptr_t *lo, uintptr_t *hi) {
	uintptr_t fs[] = {(uintptr_t)now_ns, (uintptr_t)map_region, (uintptr_t)take, (uintptr_t)put, (uintptr_t)s4d_refill_fill,
	                  (uintptr_t)policy, (uintptr_t)run, (uintptr_t)create, (uintptr_t)s4d_refill_start, (uintptr_t)s4d_refill_stop,
	                  (uintptr_t)s4d_refill_pause, (uintptr_t)s4d_refill_unmap};
	*lo = *hi = fs[0];
	for (unsigned i = 1; i < sizeof fs / sizeof fs[0]; i++) {
		if (fs[i] < *lo) *lo = fs[i];
		if (fs[i] > *hi) *hi = fs[i];
	}
}
