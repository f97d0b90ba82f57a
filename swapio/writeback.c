// The writeback: past its limit of compressed bytes in RAM, a store moves
// its coldest pages to a file, as zram's writeback moves idle pages to
// its backing device. Cold is a second-chance clock over the slot table:
// a write makes its slot young, the hand makes a young slot old as it
// passes, and an old slot the hand finds again is written back. The page
// goes to the file whole (its offset is its block's: the file is as large
// as the device, and sparse), so that a read is one O_DIRECT read into
// the request's buffer, issued on the queue's own io_uring (queue.c).
//
// Not the I/O path: this thread may wait (for the disk, for memory), and
// a store past its limit only holds more RAM meanwhile. It takes the
// slot locks for a copy of one object at a time, and no lock of Go's.
#define _GNU_SOURCE
#include "writeback.h"

#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

// write_run writes pages [i, j) of the batch, consecutive blocks, at once.
static int write_run(struct s4d_wb *w, int i, int j) {
	const char *p = w->pages + (size_t)i * S4D_PAGE;
	size_t len = (size_t)(j - i) * S4D_PAGE;
	off_t off = (off_t)(w->blocks[i] * S4D_PAGE);
	while (len) {
		ssize_t n = pwrite(w->fd, p, len, off);
		if (n < 0 && errno == EINTR) continue;
		if (n <= 0) return n < 0 ? -errno : -EIO;
		p += n, len -= (size_t)n, off += n;
	}
	return 0;
}

int s4d_wb_once(struct s4d_wb *w) {
	struct s4d_store *s = w->s;
	// Twice round at most: the first pass makes the young old.
	int n = s4d_store_wb_pick(s, &w->hand, 2 * s->blocks, w->blocks, w->tokens, w->pages, S4D_WB_BATCH);
	for (int i = 0, j; i < n; i = j) {
		for (j = i + 1; j < n && w->blocks[j] == w->blocks[j - 1] + 1; j++) {
		}
		int e = write_run(w, i, j);
		if (e) {
			atomic_store(&w->err, -e);
			atomic_fetch_add(&w->fails, 1);
			return e;  // nothing committed past the failure: those pages stay in RAM
		}
	}
	int moved = 0;
	for (int i = 0; i < n; i++) moved += s4d_store_wb_commit(s, w->blocks[i], w->tokens[i]);
	atomic_fetch_add(&w->passes, 1);
	return moved;
}

static void nap(long ms) {
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000};
	nanosleep(&ts, NULL);
}

static void *run(void *arg) {
	struct s4d_wb *w = arg;
	// Its own reclaim does no I/O: it never waits on a swap-out to the
	// device whose pages it moves.
	prctl(PR_SET_IO_FLUSHER, 1, 0, 0, 0);
	prctl(PR_SET_NAME, "s4d-writeback", 0, 0, 0);
	while (!atomic_load(&w->quit)) {
		uint64_t limit = atomic_load(&w->limit), held = atomic_load(&w->s->st.compr_bytes);
		if (!limit || held <= limit) {
			nap(50);
			continue;
		}
		// Down to 15/16 of the limit, so that it does not wake for every page.
		while (!atomic_load(&w->quit) && atomic_load(&w->s->st.compr_bytes) > limit - limit / 16) {
			int n = s4d_wb_once(w);
			if (n < 0) {
				nap(1000);  // the file refused (full, or failing): try again later
				break;
			}
			if (n == 0) {
				nap(100);  // nothing old enough yet
				break;
			}
		}
	}
	return NULL;
}

int s4d_wb_start(struct s4d_wb *w) {
	pthread_attr_t a;
	pthread_attr_init(&a);
	int e = w->stack ? pthread_attr_setstack(&a, w->stack, w->stack_len) : 0;
	sigset_t all;  // the Go runtime's handler would need an M on a thread it does not know
	sigfillset(&all);
	if (!e) e = pthread_attr_setsigmask_np(&a, &all);
	if (!e) e = pthread_create(&w->th, &a, run, w);
	pthread_attr_destroy(&a);
	return -e;
}

void s4d_wb_stop(struct s4d_wb *w) {
	atomic_store(&w->quit, 1);
	pthread_join(w->th, NULL);
}
