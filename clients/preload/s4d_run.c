// libs4d-run.so: preloaded by `s4d run`, it backs a program's large heap
// allocations with s4d regions (ipc/PROTOCOL.md, "Regions"), so that their
// cold pages live compressed in the daemon. The program is not changed.
//
// Interposed: malloc, calloc, realloc, free, posix_memalign, aligned_alloc,
// memalign and malloc_usable_size. An allocation of at least
// S4D_RUN_MIN_SIZE bytes becomes a region: a memfd mapped shared, a
// userfaultfd registered over it, both handed to the daemon at S4D_SOCKET.
// Everything else, and every allocation a region cannot be made for, goes
// to glibc's allocator (its __libc_* entry points, so no dlsym and no
// recursion). glibc's own mmap of large chunks is internal and cannot be
// interposed: that is why the malloc family is.
//
// Resident budget: S4D_RUN_RESIDENT bytes for all regions together, split
// in proportion to their sizes (SET_BUDGET when regions come and go);
// unset, a quarter of each region.
//
// The daemon's death: a thread of ours, started with the first region,
// polls each region's registering connection (its lifeline); on its end it
// prints a message and exits with status 70, so the program is stopped
// instead of reading zeros (threads touching evicted pages meanwhile wait:
// this process keeps the userfaultfd open). On the daemon's clean stop it
// hands the region back whole and says so on the lifeline: the thread
// closes the userfaultfd and the memory stays. The thread reads a lifeline
// only under the lock that frees regions, so it never reads a descriptor
// closed and reused meanwhile (a signal handler, which cannot take the
// lock, could).
//
// fork: regions are MADV_DONTFORK, so a child of fork has no mapping there
// (touching a parent's large buffer faults with SIGSEGV) instead of holes
// read as zeros; the child forgets the parent's regions. fork+exec, the
// usual case (subprocess), is unaffected.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

// libs4d's frame layer (clients/c), built into this library with every
// function static: `s4d run` needs no other library, and the program's
// own symbols are not interposed.
#define S4D_FRAME_API static __attribute__((unused))
#define S4D_LOCAL static __attribute__((unused))
#include "../c/s4d_frame.c"

extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);
extern void __libc_free(void *);

#ifndef USERFAULTFD_IOC_NEW
#define USERFAULTFD_IOC_NEW _IO(0xAA, 0x00)
#endif
#define FEATURES ((1ULL << 0) | (1ULL << 5) | (1ULL << 12)) // PAGEFAULT_FLAG_WP, MISSING_SHMEM, WP_HUGETLBFS_SHMEM
#define OP_REGISTER 11
#define OP_SET_BUDGET 12
#define OP_UNREGISTER 13
#define EXIT_LOST 70
#define MAX_REGIONS 256

struct region {
	uintptr_t addr;
	size_t size;
	uint64_t id;
	int memfd, uffd, life;
	volatile int released; // handed back whole: plain memory now
};

static struct region regs[MAX_REGIONS];
static int nregs;
static uintptr_t lo = UINTPTR_MAX, hi; // bounds of all regions: free's fast path
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static size_t min_size = 64 << 20, resident_total, total;
static int enabled, dry, ctl = -1;
static int watching, wake_fd = -1; // the lifeline thread runs; it is woken when regions change
static char sock_path[108];
static size_t page;
static size_t (*libc_usable)(void *); // glibc's malloc_usable_size

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...) {
	// A program allocating in a loop would repeat the same complaint:
	// the first few tell the story.
	static int said;
	if (__atomic_fetch_add(&said, 1, __ATOMIC_RELAXED) >= 5 && strncmp(fmt, "s4d run --dry-run", 17) != 0)
		return;
	char b[512];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(b, sizeof b, fmt, ap);
	va_end(ap);
	if (n > (int)sizeof b - 1)
		n = sizeof b - 1;
	if (write(2, b, n) < 0) {
	}
}

static size_t env_size(const char *name, size_t def) {
	const char *v = getenv(name);
	return v && *v ? strtoull(v, NULL, 10) : def;
}

// lifeline reads what came on region r's lifeline (under mu).
static void lifeline(struct region *r) {
	unsigned char b[64];
	ssize_t n = recv(r->life, b, sizeof b, MSG_DONTWAIT);
	if (n >= 20 && b[5] == OP_UNREGISTER && b[8] == 1) {
		// Handed back whole: every page is in place, the range unregistered.
		r->released = 1;
		close(r->uffd);
		r->uffd = -1;
	} else if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
		static const char msg[] = "s4d run: the s4d daemon holding this program's compressed memory went away; its pages are lost, stopping\n";
		if (write(2, msg, sizeof msg - 1) < 0) {
		}
		_exit(EXIT_LOST);
	}
}

// watch waits on every live region's lifeline and on wake_fd, which says
// the set changed. What poll reports is only a hint: the descriptor is
// looked up again under mu, where a listed lifeline is open, and read
// without waiting.
static void *watch(void *arg) {
	(void)arg;
	static struct pollfd pf[MAX_REGIONS + 1];
	for (;;) {
		int n = 0;
		pthread_mutex_lock(&mu);
		pf[n++] = (struct pollfd){.fd = wake_fd, .events = POLLIN};
		for (int i = 0; i < nregs; i++)
			if (!regs[i].released)
				pf[n++] = (struct pollfd){.fd = regs[i].life, .events = POLLIN};
		pthread_mutex_unlock(&mu);
		if (poll(pf, n, -1) < 0)
			continue; // EINTR; nothing else is expected of these descriptors
		if (pf[0].revents) {
			uint64_t v;
			if (read(wake_fd, &v, sizeof v) < 0) {
			}
		}
		pthread_mutex_lock(&mu);
		for (int k = 1; k < n; k++) {
			if (!pf[k].revents)
				continue;
			for (int i = 0; i < nregs; i++)
				if (regs[i].life == pf[k].fd && !regs[i].released)
					lifeline(&regs[i]);
		}
		pthread_mutex_unlock(&mu);
	}
	return NULL;
}

// changed wakes the watcher, starting it with the first region (under mu).
// It blocks every signal, so the program's signals go to its own threads.
static void changed(void) {
	if (!watching) {
		if ((wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) < 0)
			return;
		sigset_t all, old;
		sigfillset(&all);
		pthread_sigmask(SIG_SETMASK, &all, &old);
		pthread_attr_t attr;
		pthread_attr_init(&attr);
		pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
		pthread_t t;
		watching = pthread_create(&t, &attr, watch, NULL) == 0;
		pthread_attr_destroy(&attr);
		pthread_sigmask(SIG_SETMASK, &old, NULL);
		if (!watching) {
			say("s4d run: cannot start the thread that watches the daemon; a daemon's death will go unnoticed\n");
			close(wake_fd);
			wake_fd = -1;
			return;
		}
	}
	uint64_t one = 1;
	if (write(wake_fd, &one, sizeof one) < 0) {
	}
}

// forget_all runs in a child of fork: it has none of the regions' mappings
// (MADV_DONTFORK) and must not speak on the parent's connections.
static void forget_all(void) {
	for (int i = 0; i < nregs; i++) {
		close(regs[i].memfd);
		if (regs[i].uffd >= 0)
			close(regs[i].uffd);
		close(regs[i].life);
	}
	nregs = 0, total = 0, lo = UINTPTR_MAX, hi = 0;
	if (ctl >= 0)
		close(ctl);
	ctl = -1;
	// The watcher is not among the child's threads.
	if (wake_fd >= 0)
		close(wake_fd);
	wake_fd = -1, watching = 0;
	pthread_mutex_init(&mu, NULL);
}

__attribute__((constructor)) static void init(void) {
	page = sysconf(_SC_PAGESIZE);
	libc_usable = (size_t(*)(void *))dlsym(RTLD_NEXT, "malloc_usable_size");
	const char *s = getenv("S4D_SOCKET");
	if (!s || !*s || strlen(s) >= sizeof sock_path)
		return;
	strcpy(sock_path, s);
	min_size = env_size("S4D_RUN_MIN_SIZE", min_size);
	resident_total = env_size("S4D_RUN_RESIDENT", 0);
	dry = getenv("S4D_RUN_DRY") && *getenv("S4D_RUN_DRY") == '1';
	pthread_atfork(NULL, NULL, forget_all);
	enabled = 1;
}

// xchg sends one request (descriptors on its first byte) through libs4d's
// frame layer and reads the answer's status and up to 8 bytes of body
// into id; -1 when the exchange itself failed.
static int xchg(int fd, int op, const void *body, size_t blen, const int *fds, int nfds, uint64_t *id) {
	unsigned char r[256];
	size_t n = 0;
	int status = s4d_exchange(fd, op, body, blen, fds, nfds, r, sizeof r, &n);
	if (status < 0)
		return -1;
	if (n > sizeof r)
		n = sizeof r;
	if (status == 0 && id && n >= 8)
		memcpy(id, r, 8);
	if (status != 0 && n >= 2) {
		int ml = r[0] | r[1] << 8;
		if (ml > (int)n - 2)
			ml = n - 2;
		say("s4d run: the daemon refused a region (%.*s); using ordinary memory\n", ml, (char *)r + 2);
	}
	return status;
}

static int dial(void) { return s4d_dial(sock_path); }

static uint64_t budget_of(size_t size) {
	if (!resident_total)
		return size / 4;
	return total ? (uint64_t)((double)resident_total * size / total) : resident_total;
}

// control sends a request on the control connection (under mu), dialling
// again once if the daemon closed it (its idle timeout).
static void control(int op, const void *body, size_t blen) {
	for (int try = 0; try < 2; try++) {
		if (ctl < 0 && (ctl = dial()) < 0)
			return;
		if (xchg(ctl, op, body, blen, NULL, 0, NULL) >= 0)
			return;
		close(ctl);
		ctl = -1;
	}
}

// rebalance gives each region its share of the resident total (under mu).
static void rebalance(void) {
	if (!resident_total)
		return;
	for (int i = 0; i < nregs; i++) {
		if (regs[i].released)
			continue;
		uint64_t b[2] = {regs[i].id, budget_of(regs[i].size)};
		control(OP_SET_BUDGET, b, sizeof b);
	}
}

static int new_uffd(void) {
	int dev = open("/dev/userfaultfd", O_RDWR | O_CLOEXEC);
	if (dev >= 0) {
		int fd = ioctl(dev, USERFAULTFD_IOC_NEW, O_CLOEXEC | O_NONBLOCK);
		close(dev);
		if (fd >= 0)
			return fd;
	}
	return syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK);
}

// region_alloc makes a region of at least size bytes, or returns NULL.
static void *region_alloc(size_t size, const char *what) {
	size = (size + page - 1) / page * page;
	if (dry) {
		say("s4d run --dry-run: would back %zu bytes (%s)\n", size, what);
		return NULL;
	}
	int memfd = -1, uffd = -1, life = -1;
	void *p = MAP_FAILED;
	const char *why = "memfd";
	if ((memfd = memfd_create("s4d-run", MFD_CLOEXEC | MFD_ALLOW_SEALING)) < 0 || ftruncate(memfd, size) != 0)
		goto fail;
	fcntl(memfd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL);
	why = "mmap";
	if ((p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, memfd, 0)) == MAP_FAILED)
		goto fail;
	madvise(p, size, MADV_NOHUGEPAGE);
	why = "madvise(MADV_DONTFORK)";
	if (madvise(p, size, MADV_DONTFORK) != 0)
		goto fail;
	why = "userfaultfd (is /dev/userfaultfd open to this user?)";
	if ((uffd = new_uffd()) < 0)
		goto fail;
	struct uffdio_api api = {.api = UFFD_API, .features = FEATURES};
	why = "UFFDIO_API (write-protection of shared memory needs Linux 5.19)";
	if (ioctl(uffd, UFFDIO_API, &api) != 0)
		goto fail;
	struct uffdio_register reg = {.range = {(uintptr_t)p, size}, .mode = UFFDIO_REGISTER_MODE_MISSING | UFFDIO_REGISTER_MODE_WP};
	why = "UFFDIO_REGISTER";
	if (ioctl(uffd, UFFDIO_REGISTER, &reg) != 0)
		goto fail;
	why = "connecting to the daemon";
	if ((life = dial()) < 0)
		goto fail;
	pthread_mutex_lock(&mu);
	if (nregs == MAX_REGIONS) {
		pthread_mutex_unlock(&mu);
		why = "too many regions";
		goto fail;
	}
	total += size;
	uint64_t body[3] = {(uintptr_t)p, size, budget_of(size)}, id = 0;
	int fds[2] = {memfd, uffd};
	int st = xchg(life, OP_REGISTER, body, sizeof body, fds, 2, &id);
	if (st != 0) {
		total -= size;
		pthread_mutex_unlock(&mu);
		why = st < 0 ? "the daemon did not answer" : NULL;
		goto fail;
	}
	// The watcher learns from the lifeline that the daemon ended (or gave
	// the region back).
	regs[nregs] = (struct region){(uintptr_t)p, size, id, memfd, uffd, life, 0};
	nregs++;
	if ((uintptr_t)p < lo)
		lo = (uintptr_t)p;
	if ((uintptr_t)p + size > hi)
		hi = (uintptr_t)p + size;
	rebalance();
	changed();
	pthread_mutex_unlock(&mu);
	return p;
fail:
	if (why)
		say("s4d run: cannot back %zu bytes with a region (%s: %s); using ordinary memory\n", size, why, strerror(errno));
	if (p != MAP_FAILED)
		munmap(p, size);
	if (memfd >= 0)
		close(memfd);
	if (uffd >= 0)
		close(uffd);
	if (life >= 0)
		close(life);
	return NULL;
}

// find returns the index of the region starting at p, or -1 (under mu).
static int find(void *p) {
	for (int i = 0; i < nregs; i++)
		if (regs[i].addr == (uintptr_t)p)
			return i;
	return -1;
}

// region_free lets region i go (under mu): unmapped first, so no thread
// can fault on it, then the daemon frees its pages as the lifeline closes.
static void region_free(int i) {
	struct region r = regs[i];
	regs[i] = regs[--nregs];
	total -= r.size;
	munmap((void *)r.addr, r.size);
	if (!r.released) {
		uint64_t b[2] = {r.id, 0};
		control(OP_UNREGISTER, b, 9);
	}
	close(r.life);
	if (r.uffd >= 0)
		close(r.uffd);
	close(r.memfd);
	rebalance();
	changed();
}

static int ours(void *p) { return nregs > 0 && (uintptr_t)p >= lo && (uintptr_t)p < hi; }

void *malloc(size_t n) {
	if (enabled && n >= min_size) {
		void *p = region_alloc(n, "malloc");
		if (p)
			return p;
	}
	return __libc_malloc(n);
}

void *calloc(size_t n, size_t m) {
	size_t t;
	if (enabled && !__builtin_mul_overflow(n, m, &t) && t >= min_size) {
		void *p = region_alloc(t, "calloc"); // zero until written
		if (p)
			return p;
	}
	return __libc_calloc(n, m);
}

void free(void *p) {
	if (p && ours(p)) {
		pthread_mutex_lock(&mu);
		int i = find(p);
		if (i >= 0) {
			region_free(i);
			pthread_mutex_unlock(&mu);
			return;
		}
		pthread_mutex_unlock(&mu);
	}
	__libc_free(p);
}

size_t malloc_usable_size(void *p) {
	if (p && ours(p)) {
		pthread_mutex_lock(&mu);
		int i = find(p);
		size_t s = i >= 0 ? regs[i].size : 0;
		pthread_mutex_unlock(&mu);
		if (i >= 0)
			return s;
	}
	return libc_usable ? libc_usable(p) : 0;
}

void *realloc(void *p, size_t n) {
	size_t old = 0;
	int mine = 0;
	if (p && ours(p)) {
		pthread_mutex_lock(&mu);
		int i = find(p);
		if (i >= 0)
			mine = 1, old = regs[i].size;
		pthread_mutex_unlock(&mu);
	}
	if (!mine && (!enabled || n < min_size || !libc_usable))
		return __libc_realloc(p, n);
	if (mine && n <= old && n >= min_size)
		return p; // shrinks in place
	if (!mine && p)
		old = libc_usable ? libc_usable(p) : 0;
	void *q = malloc(n);
	if (!q)
		return NULL;
	if (p) {
		memcpy(q, p, old < n ? old : n);
		free(p);
	}
	return q;
}

int posix_memalign(void **out, size_t align, size_t n) {
	if (enabled && n >= min_size && align <= page) {
		void *p = region_alloc(n, "posix_memalign");
		if (p) {
			*out = p;
			return 0;
		}
	}
	void *p = __libc_memalign(align, n);
	if (!p)
		return ENOMEM;
	*out = p;
	return 0;
}

void *aligned_alloc(size_t align, size_t n) {
	void *p;
	return posix_memalign(&p, align, n) == 0 ? p : NULL;
}

void *memalign(size_t align, size_t n) { return aligned_alloc(align, n); }
