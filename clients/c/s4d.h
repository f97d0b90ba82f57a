/* libs4d: a C client for the s4d compressed page store (ipc/PROTOCOL.md).
 * SPDX-License-Identifier: Apache-2.0
 *
 *   s4d *c = s4d_connect(NULL, &err);           // $S4D_SOCKET, else /run/s4d/s4d.sock
 *   uint64_t keys[2] = {7, 8};
 *   int rc = s4d_put(c, "demo", keys, 2, pages, NULL);
 *   if (rc) fprintf(stderr, "%s: %s\n", s4d_strerror(rc), s4d_message(c));
 *
 * Calls return 0 (S4D_OK), a positive protocol status (the daemon refused
 * the request, or, with per-page statuses, the first page that failed), or
 * a negative S4D_E* code for what went wrong on this side. After
 * S4D_ELOST or S4D_ETIMEDOUT the next call connects again. A handle may be
 * shared between threads: calls take turns. */
#ifndef S4D_H
#define S4D_H

#include <stddef.h>
#include <stdint.h>

#ifndef S4D_API
#define S4D_API __attribute__((visibility("default")))
#endif
/* The frame layer's functions (the preload library makes them static). */
#ifndef S4D_FRAME_API
#define S4D_FRAME_API S4D_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

#define S4D_DEFAULT_SOCKET "/run/s4d/s4d.sock"

enum {
	/* Protocol statuses (ipc/PROTOCOL.md, "Status codes"). */
	S4D_OK = 0,
	S4D_MALFORMED = 1,
	S4D_VERSION = 2,
	S4D_UNKNOWN_OP = 3,
	S4D_PAGE_SIZE = 4,
	S4D_EMPTY_BATCH = 5,
	S4D_DUPLICATE_KEY = 6,
	S4D_NOT_FOUND = 7,
	S4D_PERMISSION = 8,
	S4D_NO_SPACE = 9,
	S4D_TOO_LARGE = 10,
	S4D_BAD_POOL = 11,
	S4D_INTERNAL = 12,
	S4D_SHUTTING_DOWN = 13,
	S4D_FAILED = 14,
	S4D_CORRUPT = 15,
	S4D_LIMIT = 16,
	S4D_BUSY = 17,
	/* This side's errors. */
	S4D_ECONNECT = -1,  /* the daemon cannot be reached (s4d_message says why) */
	S4D_ELOST = -2,     /* the connection broke mid-call; the next call dials again */
	S4D_EINVAL = -3,    /* a bad argument: NULL, no keys, a size that is not whole pages */
	S4D_ENOMEM = -4,    /* out of memory, or a memfd could not be made */
	S4D_EPROTO = -5,    /* the daemon's answer did not parse */
	S4D_ETIMEDOUT = -6, /* no answer within the timeout; the connection is dropped */
};

typedef struct s4d s4d;

/* A page buffer shared with the daemon (a sealed memfd mapped here): pages
 * put from it and fetched into it do not cross the socket. */
typedef struct s4d_buffer {
	void *data;
	size_t size;
	int fd;
} s4d_buffer;

/* Text for a code of either kind. */
S4D_FRAME_API const char *s4d_strerror(int code);

/* Connects and says HELLO. socket NULL or "": $S4D_SOCKET, else the
 * default. NULL on failure, with *err (if given) set. */
S4D_API s4d *s4d_connect(const char *socket, int *err);
S4D_API void s4d_close(s4d *c);
/* The daemon's message for the last error of this handle ("" if none);
 * with NULL, why this thread's last s4d_connect failed. */
S4D_API const char *s4d_message(const s4d *c);
/* What HELLO announced. */
S4D_API uint32_t s4d_page_size(const s4d *c);
S4D_API uint32_t s4d_max_batch(const s4d *c);
/* Milliseconds a send or receive may wait; 0 waits forever (the default). */
S4D_API int s4d_set_timeout(s4d *c, int ms);

/* statuses, when not NULL, receives one status per key. Batches larger
 * than the daemon's limits are split into several requests. */
S4D_API int s4d_put(s4d *c, const char *pool, const uint64_t *keys, size_t n, const void *pages, uint8_t *statuses);
/* n pages into dst (n * page size bytes); a page whose status is not OK is
 * zeroed. Missing keys make it return S4D_NOT_FOUND after filling the rest. */
S4D_API int s4d_get_into(s4d *c, const char *pool, const uint64_t *keys, size_t n, void *dst, uint8_t *statuses);
/* As s4d_get_into into memory it allocates (*pages, free() it). */
S4D_API int s4d_get(s4d *c, const char *pool, const uint64_t *keys, size_t n, void **pages, uint8_t *statuses);
/* Keys that were not there are no error; *deleted (if given) counts the others. */
S4D_API int s4d_delete(s4d *c, const char *pool, const uint64_t *keys, size_t n, size_t *deleted);
/* The STATS JSON (pool NULL or "": every pool the caller may see), NUL
 * terminated, in *json (free() it). */
S4D_API int s4d_stats(s4d *c, const char *pool, char **json);

S4D_API int s4d_buffer_alloc(size_t size, s4d_buffer *b);
S4D_API void s4d_buffer_free(s4d_buffer *b);
/* n pages of b from byte offset off, through the memfd. */
S4D_API int s4d_put_buffer(s4d *c, const char *pool, const uint64_t *keys, size_t n, const s4d_buffer *b, size_t off, uint8_t *statuses);
S4D_API int s4d_get_buffer(s4d *c, const char *pool, const uint64_t *keys, size_t n, const s4d_buffer *b, size_t off, uint8_t *statuses);

/* The frame layer, for programs that speak other operations (the preload
 * library of `s4d run` uses it for regions). s4d_dial connects to path and
 * returns the descriptor, or -1 with errno set. s4d_exchange sends one
 * request (fds, if any, with its first byte) with id 1, reads its answer,
 * copies up to cap bytes of the body to resp (*rlen: the body's full
 * length) and returns the answer's status, or a negative S4D_E* code.
 * Neither allocates memory. */
S4D_FRAME_API int s4d_dial(const char *path);
S4D_FRAME_API int s4d_exchange(int fd, int op, const void *body, size_t blen, const int *fds, int nfds,
                         void *resp, size_t cap, size_t *rlen);

#ifdef __cplusplus
}
#endif
#endif
