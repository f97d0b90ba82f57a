// Pages through a memfd buffer: s4d_bench FILE ITERATIONS stores the file's
// pages (PUT_FD) and fetches them back (GET_FD) ITERATIONS times each and
// prints "put GB/s get GB/s". Run by BenchmarkClientsMemfd in tests/.
// Per call: s4d_bench --calls N makes N one-page PUTs, then N one-page
// GETs, through the socket, and prints "put_us get_us" per call (run by
// BenchmarkClientsPerCall).
#include <s4d.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void) {
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

static int calls(int iters) {
	int err;
	s4d *c = s4d_connect(NULL, &err);
	if (!c) {
		fprintf(stderr, "connect: %s: %s\n", s4d_strerror(err), s4d_message(NULL));
		return 1;
	}
	size_t ps = s4d_page_size(c);
	unsigned char *page = malloc(ps), *back = malloc(ps);
	for (size_t i = 0; i < ps; i++)
		page[i] = (unsigned char)(i * 7);
	uint64_t key = 1;
	double t0 = now();
	for (int i = 0; i < iters; i++)
		if ((err = s4d_put(c, "callbench", &key, 1, page, NULL))) {
			fprintf(stderr, "put: %s: %s\n", s4d_strerror(err), s4d_message(c));
			return 1;
		}
	double t1 = now();
	for (int i = 0; i < iters; i++)
		if ((err = s4d_get_into(c, "callbench", &key, 1, back, NULL)) || memcmp(page, back, ps) != 0) {
			fprintf(stderr, "get: %s: %s\n", s4d_strerror(err), err ? s4d_message(c) : "the page came back different");
			return 1;
		}
	double t2 = now();
	printf("%.2f %.2f\n", (t1 - t0) / iters * 1e6, (t2 - t1) / iters * 1e6);
	s4d_close(c);
	return 0;
}

int main(int argc, char **argv) {
	if (argc == 3 && strcmp(argv[1], "--calls") == 0)
		return calls(atoi(argv[2]));
	if (argc != 3) {
		fprintf(stderr, "usage: s4d_bench FILE ITERATIONS\n");
		return 2;
	}
	int err, iters = atoi(argv[2]);
	s4d *c = s4d_connect(NULL, &err);
	if (!c) {
		fprintf(stderr, "connect: %s: %s\n", s4d_strerror(err), s4d_message(NULL));
		return 1;
	}
	FILE *f = fopen(argv[1], "rb");
	if (!f || fseek(f, 0, SEEK_END) != 0) {
		perror(argv[1]);
		return 1;
	}
	size_t size = ftell(f), ps = s4d_page_size(c), n = size / ps;
	rewind(f);
	s4d_buffer b, back;
	if (n == 0 || s4d_buffer_alloc(n * ps, &b) || s4d_buffer_alloc(n * ps, &back) || fread(b.data, 1, n * ps, f) != n * ps) {
		fprintf(stderr, "cannot load %s\n", argv[1]);
		return 1;
	}
	uint64_t *keys = malloc(n * 8);
	for (size_t i = 0; i < n; i++)
		keys[i] = i;
	double t0 = now();
	for (int i = 0; i < iters; i++)
		if ((err = s4d_put_buffer(c, "bench", keys, n, &b, 0, NULL))) {
			fprintf(stderr, "put: %s: %s\n", s4d_strerror(err), s4d_message(c));
			return 1;
		}
	double t1 = now();
	for (int i = 0; i < iters; i++)
		if ((err = s4d_get_buffer(c, "bench", keys, n, &back, 0, NULL))) {
			fprintf(stderr, "get: %s: %s\n", s4d_strerror(err), s4d_message(c));
			return 1;
		}
	double t2 = now();
	if (memcmp(b.data, back.data, n * ps) != 0) {
		fprintf(stderr, "pages came back different\n");
		return 1;
	}
	printf("%.3f %.3f\n", (double)n * ps * iters / (t1 - t0) / 1e9, (double)n * ps * iters / (t2 - t1) / 1e9);
	s4d_close(c);
	return 0;
}
