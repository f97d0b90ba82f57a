// libs4d's idle probe (tests/idle_test.go): each line "call" on stdin makes
// the same call (PUT one page, GET it back, STATS) on one handle that lives
// for the whole run, and prints its duration in microseconds.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "s4d.h"

static double now(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv) {
	int err = 0;
	s4d *c = s4d_connect(argc > 1 ? argv[1] : NULL, &err);
	if (!c) {
		printf("error: connect: %s\n", s4d_message(NULL));
		return 1;
	}
	s4d_set_timeout(c, 5000);
	size_t ps = s4d_page_size(c);
	unsigned char *page = malloc(ps), *back = malloc(ps);
	for (size_t i = 0; i < ps; i++)
		page[i] = (unsigned char)i;
	uint64_t key = 1;
	char line[64];
	while (fgets(line, sizeof line, stdin) && strcmp(line, "call\n") == 0) {
		double t = now();
		char *json = NULL;
		int rc = s4d_put(c, "idle", &key, 1, page, NULL);
		if (!rc)
			rc = s4d_get_into(c, "idle", &key, 1, back, NULL);
		if (!rc && memcmp(page, back, ps) != 0) {
			printf("error: the page came back different\n");
			fflush(stdout);
			continue;
		}
		if (!rc)
			rc = s4d_stats(c, "idle", &json);
		free(json);
		if (rc)
			printf("error: %s: %s\n", s4d_strerror(rc), s4d_message(c));
		else
			printf("%ld\n", (long)((now() - t) * 1e6));
		fflush(stdout);
	}
	s4d_close(c);
	return 0;
}
