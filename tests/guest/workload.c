// workload: a checksummed memory workload for swap tests in the guest.
//
// Each process maps MIB MiB of anonymous memory, writes every 4 KiB page
// with content derived only from (seed, pass, page index), then reads every
// page back and compares all 4096 bytes with a fresh derivation. With
// --passes P it rewrites every page P times, each pass with its own
// content, and checks the previous pass before overwriting it: a swap that
// returns an older version of a page is caught like a corrupt one.
//
// Pages are compressible on purpose (--random bytes of each page are
// pseudo-random, the rest repeats a 64-byte block of the page's own), so
// zram can hold a workload larger than the guest's RAM.
//
// Output, one line per process and one total, key=value for the test:
//   S4D-RESULT tag=TAG kind=workload proc=N mib=.. write_s=.. verify_s=.. bad=.. ...
// Exit status 0 only when every page of every process was right.
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define PAGE 4096
#define BLOCK 64

static uint64_t splitmix(uint64_t *s) {
	uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static size_t random_bytes = 512;

// fill writes page idx's content for seed: random_bytes pseudo-random
// bytes, then a 64-byte block (also from the page's stream) repeated. The
// first word is the page index, so a page swapped in at the wrong offset
// is told apart from a stale one in the report.
static void fill(uint8_t *p, uint64_t seed, uint64_t idx) {
	uint64_t s = seed * 0x2545f4914f6cdd1dULL ^ idx;
	uint64_t *w = (uint64_t *)p;
	size_t nrand = random_bytes / 8, i;
	for (i = 0; i < nrand; i++)
		w[i] = splitmix(&s);
	uint64_t blk[BLOCK / 8];
	for (i = 0; i < BLOCK / 8; i++)
		blk[i] = splitmix(&s);
	for (size_t off = random_bytes; off < PAGE; off += BLOCK) {
		size_t n = PAGE - off < BLOCK ? PAGE - off : BLOCK;
		memcpy(p + off, blk, n);
	}
	w[0] = idx;
	w[1] = seed;
}

static double now(void) {
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

// swapcounts reads the system-wide pswpin/pswpout (pages); zeros where
// /proc/vmstat cannot be read.
static void swapcounts(uint64_t *in, uint64_t *out) {
	char key[64];
	unsigned long long v;
	*in = *out = 0;
	FILE *f = fopen("/proc/vmstat", "r");
	if (!f)
		return;
	while (fscanf(f, "%63s %llu", key, &v) == 2) {
		if (!strcmp(key, "pswpin"))
			*in = v;
		else if (!strcmp(key, "pswpout"))
			*out = v;
	}
	fclose(f);
}

static int cmp_double(const void *a, const void *b) {
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

struct opts {
	long mib, passes, sample;
	long corrupt; // page to spoil after the last write (-x), -1: none
	uint64_t seed;
	int lat, random_order;
	const char *tag;
	const char *wait; // -w: the file whose presence lets the last check start
};

// order returns the page visiting order: identity, or a fixed shuffle.
static uint64_t *order(uint64_t n, uint64_t seed, int shuffle) {
	uint64_t *o = malloc(n * sizeof *o);
	if (!o)
		return NULL;
	for (uint64_t i = 0; i < n; i++)
		o[i] = i;
	if (shuffle) {
		uint64_t s = seed ^ 0x5bd1e995;
		for (uint64_t i = n - 1; i > 0; i--) {
			uint64_t j = splitmix(&s) % (i + 1), t = o[i];
			o[i] = o[j];
			o[j] = t;
		}
	}
	return o;
}

// run is one process's workload; it prints its result line and returns
// the number of wrong pages (or -1 when it could not run).
static long run(int proc, const struct opts *o) {
	uint64_t npages = (uint64_t)o->mib * 1024 * 1024 / PAGE;
	uint64_t seed = o->seed + (uint64_t)proc * 1000003;
	uint8_t *mem = mmap(NULL, npages * PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (mem == MAP_FAILED) {
		fprintf(stderr, "workload %d: mmap %ld MiB: %s\n", proc, o->mib, strerror(errno));
		return -1;
	}
	uint64_t *ord = order(npages, seed, o->random_order);
	size_t nlat_max = o->lat ? npages / o->sample + 1 : 0, nlat = 0;
	double *lat = nlat_max ? malloc(nlat_max * sizeof *lat) : NULL;
	if (!ord || (nlat_max && !lat)) {
		fprintf(stderr, "workload %d: out of memory for the page order\n", proc);
		return -1;
	}
	uint8_t want[PAGE];
	long bad = 0, misplaced = 0, stale = 0;
	double write_s = 0, verify_s = 0;
	// Swap traffic during each phase: out while writing, in while checking
	// (system-wide counters: with -j they include the other processes').
	uint64_t in0, out0, in1, out1, wr_out = 0, vf_in = 0;
	struct rusage ru0, ru1;
	getrusage(RUSAGE_SELF, &ru0);
	for (long pass = 0; pass <= o->passes; pass++) {
		// Check the previous pass's pages (all but the first time), then
		// write this pass's; the last round only checks.
		if (pass > 0) {
			// -w: say the pages are written, then wait for the go-ahead
			// (a scenario swaps them out and restarts the daemon meanwhile).
			if (o->wait && pass == o->passes) {
				printf("S4D-WORKLOAD-WRITTEN tag=%s proc=%d\n", o->tag, proc);
				fflush(stdout);
				while (access(o->wait, F_OK) != 0)
					usleep(100000);
			}
			uint64_t pseed = seed + (uint64_t)(pass - 1) * 7919;
			int measure = o->lat && pass == o->passes;
			swapcounts(&in0, &out0);
			double t0 = now();
			for (uint64_t k = 0; k < npages; k++) {
				uint64_t i = ord[k];
				uint8_t *p = mem + i * PAGE;
				if (measure && k % o->sample == 0) {
					// Time the first touch of pages not resident (nor in
					// the swap cache): a swap-in, fault to return.
					unsigned char vec = 1;
					if (mincore(p, PAGE, &vec) == 0 && !(vec & 1)) {
						double a = now();
						(void)*(volatile uint8_t *)p;
						lat[nlat++] = now() - a;
					}
				}
				fill(want, pseed, i);
				if (memcmp(p, want, PAGE) != 0) {
					uint64_t got_idx, got_seed;
					memcpy(&got_idx, p, 8);
					memcpy(&got_seed, p + 8, 8);
					if (bad < 5)
						fprintf(stderr, "workload %d: pass %ld page %llu wrong (holds page %llu seed %llu, want seed %llu)\n",
							proc, pass - 1, (unsigned long long)i, (unsigned long long)got_idx,
							(unsigned long long)got_seed, (unsigned long long)pseed);
					bad++;
					if (got_idx != i)
						misplaced++;
					else if (got_seed != pseed)
						stale++;
				}
			}
			verify_s += now() - t0;
			swapcounts(&in1, &out1);
			vf_in += in1 - in0;
		}
		if (pass == o->passes)
			break;
		uint64_t wseed = seed + (uint64_t)pass * 7919;
		swapcounts(&in0, &out0);
		double t0 = now();
		for (uint64_t k = 0; k < npages; k++)
			fill(mem + ord[k] * PAGE, wseed, ord[k]);
		write_s += now() - t0;
		swapcounts(&in1, &out1);
		wr_out += out1 - out0;
		// The self-check of -x: one byte of one page changed behind
		// the checker's back must come out as a wrong page.
		if (pass == o->passes - 1 && o->corrupt >= 0 && (uint64_t)o->corrupt < npages)
			mem[o->corrupt * PAGE + PAGE - 1] ^= 1;
	}
	getrusage(RUSAGE_SELF, &ru1);
	double p50 = 0, p99 = 0, pmax = 0;
	if (nlat > 0) {
		qsort(lat, nlat, sizeof *lat, cmp_double);
		p50 = lat[nlat / 2];
		p99 = lat[(size_t)(nlat * 0.99)];
		pmax = lat[nlat - 1];
	}
	printf("S4D-RESULT tag=%s kind=workload proc=%d mib=%ld pages=%llu passes=%ld write_s=%.3f verify_s=%.3f "
	       "bad=%ld misplaced=%ld stale=%ld majflt=%ld write_pswpout=%llu verify_pswpin=%llu "
	       "write_out_mib_s=%.1f verify_in_mib_s=%.1f swapin_n=%zu swapin_p50_us=%.1f swapin_p99_us=%.1f swapin_max_us=%.1f\n",
		o->tag, proc, o->mib, (unsigned long long)npages, o->passes, write_s, verify_s, bad, misplaced, stale,
		ru1.ru_majflt - ru0.ru_majflt, (unsigned long long)wr_out, (unsigned long long)vf_in,
		write_s > 0 ? wr_out * (PAGE / 1048576.0) / write_s : 0, verify_s > 0 ? vf_in * (PAGE / 1048576.0) / verify_s : 0, nlat, p50 * 1e6, p99 * 1e6, pmax * 1e6);
	fflush(stdout);
	munmap(mem, npages * PAGE);
	return bad;
}

static void usage(void) {
	fprintf(stderr,
		"usage: workload -m MIB [-j PROCS] [-p PASSES] [-s SEED] [-r RANDOM_BYTES] [-l] [-L SAMPLE] [-o seq|rand] [-t TAG]\n"
		"  -m MIB      memory per process (MiB)\n"
		"  -j PROCS    processes at once (default 1), each -m MiB with its own seed\n"
		"  -p PASSES   write passes, each checked before the next overwrites it (default 1)\n"
		"  -r BYTES    pseudo-random bytes per page, multiple of 8, 16..4096 (default 512; the rest repeats)\n"
		"  -l          time first touches of pages swapped out in the last check (every SAMPLE-th page, default 4)\n"
		"  -o ORDER    visit pages in order (seq, default) or in a fixed shuffle (rand)\n"
		"  -t TAG      tag of the result lines (default $S4D_TAG or 'workload')\n"
		"  -x PAGE     spoil one byte of PAGE after the last write (checks the checker: must fail)\n"
		"  -w FILE     after the last write, print S4D-WORKLOAD-WRITTEN and wait until FILE exists to check\n");
	exit(2);
}

int main(int argc, char **argv) {
	struct opts o = {.mib = 0, .passes = 1, .sample = 4, .seed = 1, .corrupt = -1};
	long procs = 1;
	o.tag = getenv("S4D_TAG") ? getenv("S4D_TAG") : "workload";
	char *end;
	int c;
	while ((c = getopt(argc, argv, "m:j:p:s:r:lL:o:t:x:w:h")) != -1) {
		switch (c) {
		case 'm': o.mib = strtol(optarg, &end, 10); if (*end || o.mib <= 0) usage(); break;
		case 'j': procs = strtol(optarg, &end, 10); if (*end || procs <= 0 || procs > 64) usage(); break;
		case 'p': o.passes = strtol(optarg, &end, 10); if (*end || o.passes <= 0) usage(); break;
		case 's': o.seed = strtoull(optarg, &end, 10); if (*end) usage(); break;
		case 'r': random_bytes = strtoul(optarg, &end, 10);
			if (*end || random_bytes < 16 || random_bytes > PAGE || random_bytes % 8) usage();
			break;
		case 'l': o.lat = 1; break;
		case 'L': o.sample = strtol(optarg, &end, 10); if (*end || o.sample <= 0) usage(); o.lat = 1; break;
		case 'o':
			if (!strcmp(optarg, "seq")) o.random_order = 0;
			else if (!strcmp(optarg, "rand")) o.random_order = 1;
			else usage();
			break;
		case 't': o.tag = optarg; break;
		case 'x': o.corrupt = strtol(optarg, &end, 10); if (*end || o.corrupt < 0) usage(); break;
		case 'w': o.wait = optarg; break;
		default: usage();
		}
	}
	if (o.mib == 0 || optind != argc)
		usage();
	double t0 = now();
	if (procs == 1) {
		long bad = run(0, &o);
		printf("S4D-RESULT tag=%s kind=workload-total procs=1 wall_s=%.3f ok=%d\n", o.tag, now() - t0, bad == 0);
		return bad == 0 ? 0 : 1;
	}
	pid_t pids[64];
	for (long i = 0; i < procs; i++) {
		pids[i] = fork();
		if (pids[i] < 0) {
			perror("workload: fork");
			return 1;
		}
		if (pids[i] == 0)
			_exit(run((int)i, &o) == 0 ? 0 : 1);
	}
	int failed = 0;
	for (long i = 0; i < procs; i++) {
		int st;
		if (waitpid(pids[i], &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
			// A child killed by the OOM killer or a signal counts as failed.
			fprintf(stderr, "workload: process %ld failed (status 0x%x)\n", i, st);
			failed++;
		}
	}
	printf("S4D-RESULT tag=%s kind=workload-total procs=%ld wall_s=%.3f ok=%d failed=%d\n", o.tag, procs, now() - t0,
		failed == 0, failed);
	return failed == 0 ? 0 : 1;
}
