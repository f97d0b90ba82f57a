// Checks libs4d against a real daemon at $S4D_SOCKET; run by
// tests/cclient_test.go. Modes: all (default), own (make pool c-alice),
// other (every operation on c-alice is refused), restart (a call in flight
// while the test kills the daemon, then the next calls on a new one),
// timeout (a call to a stopped daemon times out; the next one works).
#include <s4d.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures;
#define CHECK(cond, ...)                                              \
	do {                                                          \
		if (!(cond)) {                                        \
			fprintf(stderr, "%s:%d: ", __FILE__, __LINE__); \
			fprintf(stderr, __VA_ARGS__);                 \
			fprintf(stderr, "\n");                        \
			failures++;                                   \
		}                                                     \
	} while (0)
#define RC(expr, want)                                                                              \
	do {                                                                                        \
		int rc_ = (expr);                                                                   \
		CHECK(rc_ == (want), "%s = %d (%s), want %d (%s)", #expr, rc_, s4d_strerror(rc_), \
		      (want), s4d_strerror(want));                                                  \
	} while (0)

static void fill(unsigned char *p, size_t n, unsigned seed) {
	for (size_t i = 0; i < n; i++)
		p[i] = (unsigned char)((i / 7) * 31 + seed + (i % 13 == 0 ? i >> 12 : 0));
}

static void all(s4d *c) {
	size_t ps = s4d_page_size(c), n = 5000;
	CHECK(ps >= 4096, "page size %zu", ps);
	uint64_t *keys = malloc(n * 8);
	unsigned char *src = malloc(n * ps), *dst = malloc(n * ps);
	uint8_t *st = malloc(n);
	for (size_t i = 0; i < n; i++)
		keys[i] = 1000 + i * 3;
	fill(src, n * ps, 1);
	// Through the socket: in several requests when the daemon's batch
	// limit is under 5000 (tests/cclient_test.go starts it so).
	RC(s4d_put(c, "c-pool", keys, n, src, st), S4D_OK);
	CHECK(memchr(st, 1, n) == NULL, "statuses not all OK");
	memset(dst, 0xAA, n * ps);
	RC(s4d_get_into(c, "c-pool", keys, n, dst, NULL), S4D_OK);
	CHECK(memcmp(src, dst, n * ps) == 0, "get_into returned other bytes");
	void *got = NULL;
	RC(s4d_get(c, "c-pool", keys, 3, &got, NULL), S4D_OK);
	CHECK(got && memcmp(got, src, 3 * ps) == 0, "get returned other bytes");
	free(got);

	// A missing key in the middle: zeroed, the others in place.
	uint64_t mk[4] = {keys[0], 7, keys[2], keys[1]};
	memset(dst, 0xAA, 4 * ps);
	RC(s4d_get_into(c, "c-pool", mk, 4, dst, st), S4D_NOT_FOUND);
	CHECK(st[0] == 0 && st[1] == S4D_NOT_FOUND && st[2] == 0 && st[3] == 0, "statuses %d %d %d %d", st[0], st[1], st[2], st[3]);
	CHECK(memcmp(dst, src, ps) == 0 && memcmp(dst + 2 * ps, src + 2 * ps, ps) == 0 && memcmp(dst + 3 * ps, src + ps, ps) == 0,
	      "pages around a missing key moved wrong");
	for (size_t i = ps; i < 2 * ps; i++)
		if (dst[i]) {
			CHECK(0, "missing page not zeroed");
			break;
		}

	// memfd buffers, both ways, at an offset.
	s4d_buffer b;
	RC(s4d_buffer_alloc(2 * n * ps, &b), S4D_OK);
	memcpy((unsigned char *)b.data + n * ps, src, n * ps);
	RC(s4d_put_buffer(c, "c-buf", keys, n, &b, n * ps, NULL), S4D_OK);
	memset(b.data, 0, n * ps);
	RC(s4d_get_buffer(c, "c-buf", keys, n, &b, 0, st), S4D_OK);
	CHECK(memcmp(b.data, src, n * ps) == 0, "buffer round trip differs");
	RC(s4d_get_buffer(c, "c-buf", keys, n, &b, n * ps + 1, NULL), S4D_EINVAL); // past the end
	RC(s4d_get_buffer(c, "c-buf", keys, 2, &b, 1, NULL), S4D_MALFORMED);        // not page-aligned
	CHECK(strstr(s4d_message(c), "offset") != NULL || s4d_message(c)[0], "no message for a bad offset");
	s4d_buffer_free(&b);

	// Daemon errors, with its message; the connection stays usable.
	RC(s4d_put(c, "has space", keys, 1, src, NULL), S4D_BAD_POOL);
	CHECK(s4d_message(c)[0] != 0, "no message for BAD_POOL");
	uint64_t dup[2] = {5, 5};
	RC(s4d_put(c, "c-pool", dup, 2, src, NULL), S4D_DUPLICATE_KEY);
	RC(s4d_get_into(c, "c-nope", keys, 1, dst, NULL), S4D_NOT_FOUND);
	char *json = NULL;
	RC(s4d_stats(c, "c-nope", &json), S4D_NOT_FOUND);
	RC(s4d_stats(c, "c-pool", &json), S4D_OK);
	CHECK(json && strstr(json, "\"c-pool\"") && strstr(json, "\"pages\":5000"), "stats: %s", json ? json : "(null)");
	free(json);
	RC(s4d_stats(c, NULL, &json), S4D_OK);
	CHECK(json && strstr(json, "mm_stat"), "stats of all");
	free(json);

	// Bad input on this side.
	RC(s4d_put(c, "c-pool", keys, 0, src, NULL), S4D_EINVAL);
	RC(s4d_put(c, NULL, keys, 1, src, NULL), S4D_EINVAL);
	RC(s4d_put(c, "c-pool", NULL, 1, src, NULL), S4D_EINVAL);
	RC(s4d_put(c, "c-pool", keys, 1, NULL, NULL), S4D_EINVAL);
	RC(s4d_get_into(NULL, "c-pool", keys, 1, dst, NULL), S4D_EINVAL);
	RC(s4d_buffer_alloc(0, &b), S4D_EINVAL);

	size_t deleted = 0;
	uint64_t dk[3] = {keys[0], 99, keys[1]};
	RC(s4d_delete(c, "c-pool", dk, 3, &deleted), S4D_OK);
	CHECK(deleted == 2, "deleted %zu", deleted);
	RC(s4d_get_into(c, "c-pool", keys + 2, 1, dst, NULL), S4D_OK);

	for (int code = -6; code <= 17; code++)
		CHECK(s4d_strerror(code) && *s4d_strerror(code), "no text for %d", code);

	int err = 0;
	CHECK(s4d_connect("/nonexistent/s4d.sock", &err) == NULL && err == S4D_ECONNECT, "connect to nothing: %d", err);
	CHECK(strstr(s4d_message(NULL), "not reachable at /nonexistent/s4d.sock"), "connect message: %s", s4d_message(NULL));
	free(keys), free(src), free(dst), free(st);
}

int main(int argc, char **argv) {
	const char *mode = argc > 1 ? argv[1] : "all";
	int err = 0;
	s4d *c = s4d_connect(NULL, &err);
	if (!c) {
		fprintf(stderr, "connect: %s\n", s4d_strerror(err));
		return 1;
	}
	size_t ps = s4d_page_size(c);
	unsigned char *page = calloc(1, ps), *back = malloc(ps);
	uint64_t k = 1;
	if (!strcmp(mode, "all")) {
		all(c);
	} else if (!strcmp(mode, "own")) {
		RC(s4d_put(c, "c-alice", &k, 1, page, NULL), S4D_OK);
	} else if (!strcmp(mode, "other")) {
		char *json = NULL;
		size_t d;
		RC(s4d_get_into(c, "c-alice", &k, 1, back, NULL), S4D_PERMISSION);
		CHECK(strstr(s4d_message(c), "another user") != NULL, "message: %s", s4d_message(c));
		RC(s4d_put(c, "c-alice", &k, 1, page, NULL), S4D_PERMISSION);
		RC(s4d_delete(c, "c-alice", &k, 1, &d), S4D_PERMISSION);
		RC(s4d_stats(c, "c-alice", &json), S4D_PERMISSION);
	} else if (!strcmp(mode, "timeout")) {
		char line[16];
		RC(s4d_set_timeout(c, 300), S4D_OK);
		RC(s4d_set_timeout(c, -1), S4D_EINVAL);
		RC(s4d_put(c, "c-slow", &k, 1, page, NULL), S4D_OK);
		printf("ready\n");
		fflush(stdout);
		if (!fgets(line, sizeof line, stdin)) // the daemon is stopped
			return 1;
		RC(s4d_get_into(c, "c-slow", &k, 1, back, NULL), S4D_ETIMEDOUT);
		printf("timed out\n");
		fflush(stdout);
		if (!fgets(line, sizeof line, stdin)) // the daemon goes on
			return 1;
		RC(s4d_get_into(c, "c-slow", &k, 1, back, NULL), S4D_OK); // on a new connection
	} else if (!strcmp(mode, "restart")) {
		char line[16];
		RC(s4d_put(c, "c-restart", &k, 1, page, NULL), S4D_OK);
		printf("ready\n");
		fflush(stdout);
		if (!fgets(line, sizeof line, stdin)) // the daemon is stopped
			return 1;
		RC(s4d_get_into(c, "c-restart", &k, 1, back, NULL), S4D_ELOST); // the daemon is killed meanwhile
		printf("lost\n");
		fflush(stdout);
		if (!fgets(line, sizeof line, stdin)) // the daemon is back
			return 1;
		RC(s4d_get_into(c, "c-restart", &k, 1, back, NULL), S4D_NOT_FOUND);
		RC(s4d_put(c, "c-restart", &k, 1, page, NULL), S4D_OK);
		RC(s4d_get_into(c, "c-restart", &k, 1, back, NULL), S4D_OK);
	}
	s4d_close(c);
	free(page), free(back);
	if (failures) {
		fprintf(stderr, "%d failures\n", failures);
		return 1;
	}
	printf("ok\n");
	return 0;
}
