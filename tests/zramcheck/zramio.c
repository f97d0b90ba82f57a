/*
 * zramio: the independent measure of a zram device that `s4d bench
 * --vs-zram` is checked against (tests/zram_test.go). Written in C with
 * nothing but libc, so that it shares no code, runtime or scheduler with
 * the Go side.
 *
 *   zramio DEVICE FILE THREADS IO_BYTES
 *
 * Reads FILE into memory, writes it to DEVICE from offset 0 with O_DIRECT
 * pwrite()s of IO_BYTES (the last one shorter if FILE ends sooner), then
 * reads it back with pread()s into a second buffer and compares. THREADS
 * threads take the next I/O unit as they finish the last, as s4d's clients
 * take the next batch. Both buffers are faulted in before the clock starts:
 * faults on either side would be timed as zram's cost. CPU is getrusage()
 * of the whole process around each phase. Prints one line of JSON.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static char *buf;          /* what is written, or what is read into */
static long long size;     /* bytes of FILE */
static long long io;       /* bytes per I/O */
static long long units;    /* I/Os in all */
static long long next;     /* next I/O unit to take, shared */
static int writing, done;
static pthread_barrier_t go, finished;

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static double cpu(void)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 +
	       ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
}

static void die(const char *what)
{
	fprintf(stderr, "zramio: %s: %s\n", what, strerror(errno));
	exit(1);
}

/* worker does its share of each phase between the two barriers, until
 * main sets done. */
static void *worker(void *arg)
{
	int fd = *(int *)arg;
	for (;;) {
		pthread_barrier_wait(&go);
		if (done)
			return NULL;
		for (;;) {
			long long u = __atomic_fetch_add(&next, 1, __ATOMIC_RELAXED);
			if (u >= units)
				break;
			long long off = u * io, n = size - off < io ? size - off : io;
			ssize_t got;
			do
				got = writing ? pwrite(fd, buf + off, n, off) : pread(fd, buf + off, n, off);
			while (got < 0 && errno == EINTR);
			if (got != n) {
				if (got >= 0)
					errno = EIO;
				die(writing ? "pwrite" : "pread");
			}
		}
		pthread_barrier_wait(&finished);
	}
}

/* phase runs every I/O on the workers, made before and waiting, as the Go
 * side's are: a thread made inside the clock waits its turn behind
 * everything already running on a busy machine. It returns the wall
 * seconds and sets *cpus to the process's CPU seconds over the span. */
static double phase(char *b, int w, double *cpus)
{
	buf = b, writing = w, next = 0;
	double c0 = cpu(), t0 = now();
	pthread_barrier_wait(&go);
	pthread_barrier_wait(&finished);
	double t = now() - t0;
	*cpus = cpu() - c0;
	return t;
}

static char *mapped(long long n)
{
	char *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		die("mmap");
	return p;
}

int main(int argc, char **argv)
{
	if (argc != 5) {
		fprintf(stderr, "usage: zramio DEVICE FILE THREADS IO_BYTES\n");
		return 2;
	}
	const char *dev = argv[1];
	int nthreads = atoi(argv[3]);
	io = atoll(argv[4]);
	if (nthreads < 1 || io < 4096 || io % 4096) {
		fprintf(stderr, "zramio: want at least one thread and I/Os of a multiple of 4096 bytes\n");
		return 2;
	}
	/* The workers are made first and sleep while the buffers are filled:
	 * on a busy machine a thread made just before the clock starts runs
	 * behind the rest for a while (measured: 2 threads wrote 0.55 GB/s
	 * made late, 0.61 made first, Go's long-lived threads 0.64). */
	int fds[nthreads];
	pthread_t th[nthreads];
	pthread_barrier_init(&go, NULL, nthreads + 1);
	pthread_barrier_init(&finished, NULL, nthreads + 1);
	for (int i = 0; i < nthreads; i++) {
		if ((fds[i] = open(dev, O_RDWR | O_DIRECT | O_CLOEXEC)) < 0)
			die(dev);
		if ((errno = pthread_create(&th[i], NULL, worker, &fds[i])))
			die("pthread_create");
	}
	int in = open(argv[2], O_RDONLY);
	struct stat st;
	if (in < 0 || fstat(in, &st) < 0)
		die(argv[2]);
	size = st.st_size;
	if (size == 0 || size % 4096) {
		fprintf(stderr, "zramio: %s: want whole 4096-byte blocks\n", argv[2]);
		return 2;
	}
	units = (size + io - 1) / io;

	/* Reading the file in writes, and so faults in, every source page. */
	char *src = mapped(size), *dst = mapped(size);
	for (long long off = 0; off < size;) {
		ssize_t n = pread(in, src + off, size - off, off);
		if (n <= 0)
			die("reading the file");
		off += n;
	}
	close(in);
	memset(dst, 0xA5, size); /* faulted in; also shows a block never read */

	double wcpu, rcpu;
	double w = phase(src, 1, &wcpu);
	double r = phase(dst, 0, &rcpu);
	done = 1;
	pthread_barrier_wait(&go);
	for (int i = 0; i < nthreads; i++) {
		pthread_join(th[i], NULL);
		close(fds[i]);
	}
	if (memcmp(src, dst, size)) {
		fprintf(stderr, "zramio: %s returned other bytes\n", dev);
		return 1;
	}
	printf("{\"bytes\":%lld,\"write_s\":%.6f,\"write_cpu_s\":%.6f,\"read_s\":%.6f,\"read_cpu_s\":%.6f}\n",
	       size, w, wcpu, r, rcpu);
	return 0;
}
