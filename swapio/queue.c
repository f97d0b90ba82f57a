// A ublk queue served from C (doc.go): the thread sets up its own
// io_uring (the kernel takes a queue's commands only from the task that
// fetched first), fetches every tag, then answers requests from the
// store one completion at a time. Once serving it makes no system call
// but io_uring_enter (and the store's eventfd write), allocates nothing
// and never calls into Go. The layouts are those of
// include/uapi/linux/ublk_cmd.h and io_uring.h, written out here so that
// an older header on the build machine does not matter.
// No switch compiled to a table in .rodata: LockCode locks this code's
// pages, not the program's read-only data (on tmpfs it could swap).
#pragma GCC optimize("no-jump-tables")
#define _GNU_SOURCE
#include "queue.h"

#include <errno.h>
#include <sched.h>
#include <link.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <poll.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define SETUP_COOP_TASKRUN (1u << 8)
#define SETUP_SQE128 (1u << 10)
#define SETUP_SINGLE_ISSUER (1u << 12)
#define SETUP_DEFER_TASKRUN (1u << 13)
#define FEAT_SINGLE_MMAP 1u
#define ENTER_GETEVENTS 1u
#define OP_TIMEOUT 11
#define OP_READ 22
#define OP_URING_CMD 46
#define OFF_SQ_RING 0ull
#define OFF_CQ_RING 0x8000000ull
#define OFF_SQES 0x10000000ull
#define SQE_SIZE 128

#define IO_FETCH_REQ 0x20
#define IO_COMMIT_AND_FETCH_REQ 0x21
#define IOWR(nr, size) (3u << 30 | (uint32_t)(size) << 16 | (uint32_t)'u' << 8 | (nr))

struct sq_off { uint32_t head, tail, ring_mask, ring_entries, flags, dropped, array, resv1; uint64_t user_addr; };
struct cq_off { uint32_t head, tail, ring_mask, ring_entries, overflow, cqes, flags, resv1; uint64_t user_addr; };
struct uring_params {
	uint32_t sq_entries, cq_entries, flags, sq_thread_cpu, sq_thread_idle, features, wq_fd, resv[3];
	struct sq_off sq;
	struct cq_off cq;
};
struct cqe { uint64_t user_data; int32_t res; uint32_t flags; };
struct io_desc { uint32_t op_flags, nr_sectors; uint64_t start_sector, addr; };
struct io_cmd { uint16_t q_id, tag; int32_t result; uint64_t addr; };

struct ring {
	int fd;
	void *sq, *cq, *sqes;
	size_t sq_len, cq_len, sqes_len;
	_Atomic uint32_t *sq_head, *sq_tail, *cq_head, *cq_tail;
	uint32_t *sq_array, sq_mask, cq_mask, entries, tail;
	struct cqe *cqes;
};

static int ring_setup(struct ring *r, uint32_t entries, uint32_t flags) {
	struct uring_params p;
	memset(&p, 0, sizeof p);
	p.flags = SETUP_SQE128 | flags;
	long fd = syscall(__NR_io_uring_setup, entries, &p);
	if (fd < 0) return -errno;
	r->fd = (int)fd;
	r->entries = p.sq_entries;
	r->sq_len = p.sq.array + p.sq_entries * 4;
	r->cq_len = p.cq.cqes + p.cq_entries * sizeof(struct cqe);
	if (p.features & FEAT_SINGLE_MMAP) r->sq_len = r->cq_len = r->sq_len > r->cq_len ? r->sq_len : r->cq_len;
	r->sq = mmap(0, r->sq_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, r->fd, OFF_SQ_RING);
	if (r->sq == MAP_FAILED) goto fail;
	r->cq = r->sq;
	if (!(p.features & FEAT_SINGLE_MMAP)) {
		r->cq = mmap(0, r->cq_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, r->fd, OFF_CQ_RING);
		if (r->cq == MAP_FAILED) goto fail;
	}
	r->sqes_len = (size_t)p.sq_entries * SQE_SIZE;
	r->sqes = mmap(0, r->sqes_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, r->fd, OFF_SQES);
	if (r->sqes == MAP_FAILED) goto fail;
	char *sq = r->sq, *cq = r->cq;
	r->sq_head = (void *)(sq + p.sq.head);
	r->sq_tail = (void *)(sq + p.sq.tail);
	r->sq_mask = *(uint32_t *)(sq + p.sq.ring_mask);
	r->sq_array = (void *)(sq + p.sq.array);
	r->cq_head = (void *)(cq + p.cq.head);
	r->cq_tail = (void *)(cq + p.cq.tail);
	r->cq_mask = *(uint32_t *)(cq + p.cq.ring_mask);
	r->cqes = (void *)(cq + p.cq.cqes);
	r->tail = atomic_load(r->sq_tail);
	return 0;
fail:;
	int e = -errno;
	close(r->fd);
	return e;
}

static void ring_close(struct ring *r) {
	if (r->sqes && r->sqes != MAP_FAILED) munmap(r->sqes, r->sqes_len);
	if (r->cq && r->cq != MAP_FAILED && r->cq != r->sq) munmap(r->cq, r->cq_len);
	if (r->sq && r->sq != MAP_FAILED) munmap(r->sq, r->sq_len);
	close(r->fd);
}

// sqe_next is the next SQE, zeroed and queued (published at submit).
// The ring is sized for every SQE that can be queued at once (run).
static unsigned char *sqe_next(struct ring *r) {
	uint32_t i = r->tail & r->sq_mask;
	unsigned char *sqe = (unsigned char *)r->sqes + (size_t)i * SQE_SIZE;
	memset(sqe, 0, SQE_SIZE);
	r->sq_array[i] = i;
	r->tail++;
	return sqe;
}

// prep queues a FETCH_REQ or COMMIT_AND_FETCH_REQ.
static void prep(struct s4d_queue *q, struct ring *r, uint32_t nr, uint16_t tag, int32_t result) {
	unsigned char *sqe = sqe_next(r);
	sqe[0] = OP_URING_CMD;
	*(int32_t *)(sqe + 4) = q->cdev;
	*(uint32_t *)(sqe + 8) = IOWR(nr, sizeof(struct io_cmd));
	*(uint64_t *)(sqe + 32) = tag;
	struct io_cmd c = {.q_id = q->qid, .tag = tag, .result = result, .addr = (uint64_t)(uintptr_t)(q->bufs + (size_t)tag * q->max_io)};
	memcpy(sqe + 48, &c, sizeof c);
}

// The timer that ages held writes: a relative timeout, one in flight at
// a time, told from a tag's completion by its user_data.
#define TIMER_DATA (1ull << 32)
#define TICK_NS 2000000  // 2 ms
struct kts { int64_t sec, nsec; };

static void prep_timer(struct ring *r, const struct kts *ts) {
	unsigned char *sqe = sqe_next(r);
	sqe[0] = OP_TIMEOUT;
	*(int32_t *)(sqe + 4) = -1;
	*(uint64_t *)(sqe + 16) = (uint64_t)(uintptr_t)ts;  // the kernel reads it at submit
	*(uint32_t *)(sqe + 24) = 1;
	*(uint64_t *)(sqe + 32) = TIMER_DATA;
}

// File reads (a page written back, writeback.c) complete with this bit
// in user_data, the tag and the page's index below it.
#define FILE_DATA (1ull << 33)

static void prep_read(struct ring *r, const struct s4d_fref *ref, void *page, uint64_t data) {
	unsigned char *sqe = sqe_next(r);
	sqe[0] = OP_READ;
	*(int32_t *)(sqe + 4) = ref->fd;
	*(uint64_t *)(sqe + 8) = ref->off;
	*(uint64_t *)(sqe + 16) = (uint64_t)(uintptr_t)page;
	*(uint32_t *)(sqe + 24) = S4D_PAGE;
	*(uint64_t *)(sqe + 32) = data;
}

// submit publishes the queued SQEs and, with wait, waits for a completion.
static int submit(struct ring *r, int wait) {
	atomic_store_explicit(r->sq_tail, r->tail, memory_order_release);
	for (;;) {
		uint32_t pending = r->tail - atomic_load_explicit(r->sq_head, memory_order_acquire);
		long n = syscall(__NR_io_uring_enter, r->fd, pending, wait ? 1 : 0, wait ? ENTER_GETEVENTS : 0, 0, 0);
		int ready = atomic_load_explicit(r->cq_tail, memory_order_acquire) != atomic_load_explicit(r->cq_head, memory_order_relaxed);
		if (n >= 0) {
			if (wait && !ready) continue;  // woken with nothing to read (task work ran)
			return 0;
		}
		if (errno == EINTR) continue;
		if ((errno == EAGAIN || errno == EBUSY) && ready) return 0;
		if (errno == EAGAIN || errno == EBUSY) continue;
		return -errno;
	}
}

// read_file starts the read of page i of tag's request from the store's
// file, on the queue's own ring: the thread goes on serving meanwhile.
static int read_file(struct s4d_queue *q, struct ring *r, uint16_t tag, uint64_t block, uint64_t i) {
	struct s4d_fref ref;
	if (!q->fr || !q->ops.file || i >= S4D_IO_PAGES) return -EIO;
	int e = q->ops.file(q->store, block, &ref);
	if (e) return e;
	struct s4d_fread *f = &q->fr[tag];
	f->pend++;
	f->mask |= 1u << i;
	f->hash[i] = ref.hash;
	prep_read(r, &ref, q->bufs + (size_t)tag * q->max_io + i * S4D_PAGE, FILE_DATA | (uint64_t)tag << 8 | i);
	return 0;
}

// file_done counts one file read of tag's request done and, with the
// last, answers the request: each page read checked against its hash.
static void file_done(struct s4d_queue *q, struct ring *r, uint16_t tag, int32_t res, int detached) {
	struct s4d_fread *f = &q->fr[tag];
	if (res != S4D_PAGE && f->res >= 0) f->res = -EIO;
	if (--f->pend) return;
	int32_t out = f->res;
	const char *buf = q->bufs + (size_t)tag * q->max_io;
	for (uint32_t i = 0; out >= 0 && i < S4D_IO_PAGES; i++)
		if ((f->mask >> i & 1) && s4d_hash(buf + i * S4D_PAGE) != f->hash[i]) out = -EIO;
	f->mask = 0;
	f->res = 0;
	if (detached) return;  // unanswered, as every request after a detach
	if (out < 0) atomic_fetch_add_explicit(&q->st.errors, 1, memory_order_relaxed);
	prep(q, r, IO_COMMIT_AND_FETCH_REQ, tag, out);
}

// serve answers one request from the store: the bytes done, or -errno.
// A write starts at page *done and, refused for want of memory, leaves
// there the first page not stored (a held write resumes from it; retry:
// it was counted when first served).
#define PENDING INT32_MIN  // serve: answered once its file reads are done (file_done)

static int32_t serve(struct s4d_queue *q, struct ring *r, uint16_t tag, uint16_t *done, int retry) {
	const struct io_desc *d = (const struct io_desc *)q->descs + tag;
	uint32_t op = d->op_flags & 0xff;
	uint64_t first = d->start_sector >> 3, n = d->nr_sectors >> 3;
	char *buf = q->bufs + (size_t)tag * q->max_io;
	if ((d->start_sector | d->nr_sectors) & 7) return -EINVAL;  // 4 KiB blocks only
	switch (op) {
	case 0:  // READ
		atomic_fetch_add_explicit(&q->st.reads, 1, memory_order_relaxed);
		atomic_fetch_add_explicit(&q->st.read_pages, n, memory_order_relaxed);
		for (uint64_t i = 0; i < n; i++) {
			int e = q->ops.read(q->store, first + i, buf + i * S4D_PAGE);
			if (e == S4D_IN_FILE) e = read_file(q, r, tag, first + i, i);
			if (e) {
				if (q->fr && q->fr[tag].pend) {  // answered once the reads in flight are done
					q->fr[tag].res = e;
					return PENDING;
				}
				return e;
			}
		}
		if (q->fr && q->fr[tag].pend) {
			q->fr[tag].res = (int32_t)(d->nr_sectors << 9);
			return PENDING;
		}
		break;
	case 1:  // WRITE
		if (!retry) {
			atomic_fetch_add_explicit(&q->st.writes, 1, memory_order_relaxed);
			atomic_fetch_add_explicit(&q->st.write_pages, n, memory_order_relaxed);
		}
		for (uint64_t i = *done; i < n; i++) {
			int e = q->ops.write(q->store, first + i, buf + i * S4D_PAGE, q->scratch);
			if (e == -ENOMEM) {
				atomic_fetch_add_explicit(&q->st.nomem, 1, memory_order_relaxed);
				*done = (uint16_t)i;
			}
			if (e) return e;
		}
		break;
	case 2:  // FLUSH: nothing is volatile
		return 0;
	case 3:  // DISCARD
	case 5:  // WRITE_ZEROES: an empty block reads as zeros
		atomic_fetch_add_explicit(&q->st.discards, 1, memory_order_relaxed);
		q->ops.discard(q->store, first, n);
		break;
	default:
		return -EOPNOTSUPP;
	}
	return (int32_t)(d->nr_sectors << 9);
}

// retry_held answers what it can of the held writes and returns how many
// are still held. A write the store refuses for want of a slab (ENOMEM)
// is held rather than failed at once: failed, the kernel would send the
// page again at once, and with the ring empty every reclaiming task spun
// on failing swap-outs while the refill, short of CPU and memory, could
// not hand in the slab that ends it (1 GiB guest, 1 vCPU, 3 processes of
// twice its RAM). Held, the pages stay under writeback and reclaim waits
// for them, or for a tag. It is tried again when the store has room, and
// fails after hold_ticks ticks: a refill that cannot get memory at all
// lets the kernel see the swap-out fail (and kill, if it must).
static uint32_t retry_held(struct s4d_queue *q, struct ring *r, uint32_t nheld, uint32_t ticks) {
	int room = nheld && q->ops.room(q->store);
	uint32_t kept = 0;
	for (uint32_t i = 0; i < nheld; i++) {
		struct s4d_held h = q->held[i];
		int32_t res = -ENOMEM;
		if (room) {
			res = serve(q, r, h.tag, &h.done, 1);
			room = res != -ENOMEM;  // refused: the rest would be too
		}
		if (res == -ENOMEM && ticks - h.since < q->hold_ticks) {
			q->held[kept++] = h;
			continue;
		}
		if (res < 0) {
			atomic_fetch_add_explicit(&q->st.errors, 1, memory_order_relaxed);
			if (res == -ENOMEM) atomic_fetch_add_explicit(&q->st.held_failed, 1, memory_order_relaxed);
		}
		prep(q, r, IO_COMMIT_AND_FETCH_REQ, h.tag, res);
	}
	return kept;
}

static void *run(void *arg) {
	struct s4d_queue *q = arg;
	// The thread's allocations (none once serving) do not recurse into
	// reclaim of block I/O: it is the server of a swap device.
	if (prctl(PR_SET_IO_FLUSHER, 1, 0, 0, 0)) q->flusher_err = errno;
	prctl(PR_SET_NAME, "s4d-swapq", 0, 0, 0);  // to find it in a stall's stacks
	struct ring r;
	memset(&r, 0, sizeof r);
	uint32_t flags = q->plain_ring ? 0 : SETUP_COOP_TASKRUN | SETUP_SINGLE_ISSUER | SETUP_DEFER_TASKRUN;
	// An SQE for every tag's command and one for the timer, and with a
	// file, one for each page a request may read from it.
	uint32_t entries = q->depth + 1u + (q->fr ? (uint32_t)q->depth * S4D_IO_PAGES : 0);
	int e = ring_setup(&r, entries, flags);
	if (e == -EINVAL && flags) flags = 0, e = ring_setup(&r, entries, 0);
	if (e) {
		atomic_store(&q->ready, e);
		atomic_store(&q->done, 1);
		return NULL;
	}
	q->ring_flags = flags;
	for (uint16_t t = 0; t < q->depth; t++) prep(q, &r, IO_FETCH_REQ, t, 0);
	if ((e = submit(&r, 0))) {
		ring_close(&r);
		atomic_store(&q->ready, e);
		atomic_store(&q->done, 1);
		return NULL;
	}
	atomic_store(&q->ready, 1);
	// Held writes (see hold): the oldest first, aged by a timer's ticks.
	uint32_t nheld = 0, ticks = 0;
	int armed = 0;
	const struct kts tick = {0, TICK_NS};
	int live = q->depth;
	while (live > 0) {
		if ((e = submit(&r, 1))) {
			q->err = e;
			break;
		}
		atomic_fetch_add_explicit(&q->st.waits, 1, memory_order_relaxed);
		uint32_t head = atomic_load_explicit(r.cq_head, memory_order_relaxed);
		uint32_t tail = atomic_load_explicit(r.cq_tail, memory_order_acquire);
		atomic_store(&q->busy, 1);
		int detached = atomic_load(&q->detach);
		for (; head != tail; head++) {
			struct cqe c = r.cqes[head & r.cq_mask];
			if (c.user_data == TIMER_DATA) {
				armed = 0;
				ticks++;
				continue;
			}
			if (c.user_data & FILE_DATA) {
				file_done(q, &r, (uint16_t)(c.user_data >> 8), c.res, detached);
				continue;
			}
			uint16_t tag = (uint16_t)c.user_data;
			if (c.res == 0) {
				// Detached: unanswered, the kernel sends it again to the
				// next server (user recovery with reissue).
				if (detached) continue;
				atomic_fetch_add_explicit(&q->st.requests, 1, memory_order_relaxed);
				uint16_t done = 0;
				int32_t res = serve(q, &r, tag, &done, 0);
				if (res == PENDING) continue;
				if (res == -ENOMEM && q->hold_ticks && q->ops.room) {
					q->held[nheld++] = (struct s4d_held){.tag = tag, .done = done, .since = ticks};
					atomic_fetch_add_explicit(&q->st.held, 1, memory_order_relaxed);
					continue;
				}
				if (res < 0) atomic_fetch_add_explicit(&q->st.errors, 1, memory_order_relaxed);
				prep(q, &r, IO_COMMIT_AND_FETCH_REQ, tag, res);
			} else {
				live--;  // aborted (-ENODEV: the device is going away) or failed
				if (c.res != -ENODEV && !q->err) q->err = c.res;
			}
		}
		atomic_store_explicit(r.cq_head, head, memory_order_release);
		if (detached) nheld = 0;  // left unanswered, as above
		nheld = retry_held(q, &r, nheld, ticks);
		if (nheld && !armed) {
			prep_timer(&r, &tick);
			armed = 1;
		}
		atomic_store(&q->busy, 0);
	}
	ring_close(&r);
	atomic_store(&q->done, 1);
	return NULL;
}

// start creates the thread, on the queue's CPUs when pinned.
static int start(struct s4d_queue *q, int pinned) {
	pthread_attr_t a;
	pthread_attr_init(&a);
	int e = q->stack ? pthread_attr_setstack(&a, q->stack, q->stack_len) : 0;
	// Every signal blocked from the thread's first instruction: one
	// delivered here would run the Go runtime's handler on a thread Go
	// does not know, which then needs memory (an M of its own).
	sigset_t all;
	sigfillset(&all);
	if (!e) e = pthread_attr_setsigmask_np(&a, &all);
	if (!e && pinned) e = pthread_attr_setaffinity_np(&a, sizeof q->cpus, (cpu_set_t *)q->cpus);
	if (!e) e = pthread_create(&q->th, &a, run, q);
	pthread_attr_destroy(&a);
	return e;
}

int s4d_queue_start(struct s4d_queue *q) {
	// On the CPUs whose requests the queue takes (blk-mq's map): the
	// request's submitter and its server share a cache, and a queue's
	// thread never waits behind another queue's on one CPU.
	int pinned = 0;
	for (unsigned i = 0; i < sizeof q->cpus / sizeof q->cpus[0]; i++) pinned |= q->cpus[i] != 0;
	int e = start(q, pinned);
	if (e == EINVAL && pinned) {
		// Not one of its CPUs is ours to run on (a cpuset, CPUAffinity=):
		// unpinned, as before.
		memset(q->cpus, 0, sizeof q->cpus);
		e = start(q, 0);
	}
	return -e;
}

void s4d_store_ops(struct s4d_ops *o) {
	o->read = (int (*)(void *, uint64_t, void *))s4d_store_read;
	o->write = (int (*)(void *, uint64_t, const void *, void *))s4d_store_write;
	o->discard = (void (*)(void *, uint64_t, uint64_t))s4d_store_discard;
	o->room = (int (*)(void *))s4d_store_room;
	o->file = (int (*)(void *, uint64_t, struct s4d_fref *))s4d_store_file;
}

void s4d_queue_join(struct s4d_queue *q) { pthread_join(q->th, NULL); }

// s4d_code_range gives the addresses of this path's code (the functions of
// store.c and queue.c), for Go to lock those pages only.
void s4d_store_code(uintptr_t *lo, uintptr_t *hi);
void s4d_refill_code(uintptr_t *lo, uintptr_t *hi);
void s4d_code_range(uintptr_t *lo, uintptr_t *hi) {
	uintptr_t fs[] = {(uintptr_t)ring_setup, (uintptr_t)ring_close, (uintptr_t)sqe_next, (uintptr_t)prep, (uintptr_t)prep_timer, (uintptr_t)submit, (uintptr_t)retry_held,
	                  (uintptr_t)serve, (uintptr_t)prep_read, (uintptr_t)read_file, (uintptr_t)file_done, (uintptr_t)run, (uintptr_t)start, (uintptr_t)s4d_queue_start, (uintptr_t)s4d_queue_join};
	uintptr_t rlo, rhi;
	s4d_store_code(lo, hi);
	s4d_refill_code(&rlo, &rhi);
	if (rlo < *lo) *lo = rlo;
	if (rhi > *hi) *hi = rhi;
	for (unsigned i = 0; i < sizeof fs / sizeof fs[0]; i++) {
		if (fs[i] < *lo) *lo = fs[i];
		if (fs[i] > *hi) *hi = fs[i];
	}
	*hi += 64 << 10;  // the last function's body: none here is longer
}

// s4d_pin_addrs lists what else of the program the path touches once
// serving, each to be locked page-wise: the static variables it reads,
// the program's tables of calls into shared libraries (GOT), and the
// stubs its calls into the C library go through (PLT: in a program that
// is not position-independent, a library function's address taken here
// is its stub). On tmpfs (an initramfs) or as copied-on-write pages
// these can otherwise go to swap, on the very device the fault waits for.
int s4d_store_statics(uintptr_t *out);
int s4d_pin_addrs(uintptr_t *out, int max) {
	int n = s4d_store_statics(out);
	uintptr_t got = 0;  // DT_PLTGOT: the program's .got.plt (absolute: it is not position-independent)
	for (ElfW(Dyn) *d = _DYNAMIC; d->d_tag != DT_NULL; d++)
		if (d->d_tag == DT_PLTGOT) got = d->d_un.d_ptr;
	uintptr_t more[] = {got, (uintptr_t)memcpy, (uintptr_t)memset, (uintptr_t)syscall,
	                    (uintptr_t)write, (uintptr_t)__errno_location,
	                    // the refill's calls (refill.c)
	                    (uintptr_t)mmap, (uintptr_t)munmap, (uintptr_t)mlock, (uintptr_t)munlock, (uintptr_t)madvise,
	                    (uintptr_t)poll, (uintptr_t)read, (uintptr_t)nanosleep, (uintptr_t)clock_gettime};
	for (unsigned i = 0; i < sizeof more / sizeof more[0] && n < max; i++) out[n++] = more[i];
	return n;
}
