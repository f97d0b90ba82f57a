// The preload's idle probe (tests/idle_test.go), run under `s4d run`: a
// region made at the start holds a pattern; each line "call" on stdin makes
// a new region (a lifeline dialled, REGISTER, the budget set on the control
// connection), fills it, checks the first region, frees the new one
// (UNREGISTER on the control connection), and prints the duration in
// microseconds.
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define REGION (256 << 10)

static double now(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void fill(unsigned char *p, size_t n, unsigned seed) {
	for (size_t i = 0; i < n; i += 4096)
		p[i] = (unsigned char)(i / 4096 * 7 + seed);
}

// in_region says whether p lies in a mapping of the preload's memfds:
// without it the probe would pass on plain memory.
static int in_region(const void *p) {
	FILE *f = fopen("/proc/self/maps", "r");
	char l[512];
	int found = 0;
	while (f && !found && fgets(l, sizeof l, f)) {
		unsigned long lo, hi;
		if (sscanf(l, "%lx-%lx", &lo, &hi) == 2 && (unsigned long)p >= lo && (unsigned long)p < hi)
			found = strstr(l, "s4d-run") != NULL;
	}
	if (f)
		fclose(f);
	return found;
}

static int check(const unsigned char *p, size_t n, unsigned seed) {
	for (size_t i = 0; i < n; i += 4096)
		if (p[i] != (unsigned char)(i / 4096 * 7 + seed))
			return 0;
	return 1;
}

int main(void) {
	unsigned char *keep = malloc(2 * REGION);
	if (!keep)
		return 1;
	fill(keep, 2 * REGION, 3);
	char line[64];
	unsigned seed = 10;
	while (fgets(line, sizeof line, stdin) && strcmp(line, "call\n") == 0) {
		double t = now();
		unsigned char *p = malloc(REGION);
		if (!p) {
			printf("error: malloc\n");
			fflush(stdout);
			continue;
		}
		if (!in_region(p) || !in_region(keep)) {
			printf("error: the allocation is not a region\n");
			fflush(stdout);
			free(p);
			continue;
		}
		fill(p, REGION, ++seed);
		int ok = check(p, REGION, seed) && check(keep, 2 * REGION, 3);
		free(p);
		if (!ok)
			printf("error: a region's bytes came back different\n");
		else
			printf("%ld\n", (long)((now() - t) * 1e6));
		fflush(stdout);
	}
	free(keep);
	return 0;
}
