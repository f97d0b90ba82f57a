// libs4d: the C client of ipc/PROTOCOL.md (see s4d.h): a handle over one
// connection, dialled again after it breaks, and memfd page buffers.
#define _GNU_SOURCE
#include "s4d_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/time.h>
#include <sys/uio.h>
#include <unistd.h>

// ---- the handle: one connection, dialled again after it breaks ----

static void drop(s4d *c) {
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
}

static int fail(s4d *c, int rc, const char *what) {
	if (rc < 0 && rc != S4D_EINVAL && rc != S4D_ENOMEM) {
		snprintf(c->msg, sizeof c->msg, "%s: %s", what, s4d_strerror(rc));
		if (rc != S4D_ECONNECT)
			drop(c); // the stream can no longer be trusted
	}
	return rc;
}

// refused reads an error answer's message (a str) into c->msg.
static int refused(s4d *c, int status, size_t blen) {
	unsigned char b[2 + 253];
	size_t k = blen < sizeof b ? blen : sizeof b;
	int rc = recv_all(c->fd, b, k);
	if (!rc && blen > k)
		rc = discard(c->fd, blen - k);
	if (rc)
		return fail(c, rc, "reading an error answer");
	size_t ml = k >= 2 ? (size_t)(b[0] | b[1] << 8) : 0;
	if (ml > k - 2)
		ml = k >= 2 ? k - 2 : 0;
	snprintf(c->msg, sizeof c->msg, "%.*s", (int)ml, (char *)b + 2);
	return status;
}

static int hello(s4d *c) {
	unsigned char b[8 + 2 + 6];
	put32(b, S4D_HELLO_MAGIC);
	b[4] = 1, b[5] = 0, b[6] = 1, b[7] = 0;
	b[8] = 6, b[9] = 0;
	memcpy(b + 10, "libs4d", 6);
	unsigned char r[512];
	size_t n = 0;
	int st = s4d_exchange(c->fd, S4D_OP_HELLO, b, sizeof b, NULL, 0, r, sizeof r, &n);
	if (st > 0) {
		size_t ml = n >= 2 ? (size_t)(r[0] | r[1] << 8) : 0;
		if (ml + 2 > n || ml + 2 > sizeof r)
			ml = 0;
		snprintf(c->msg, sizeof c->msg, "%.*s", (int)ml, (char *)r + 2);
		return st;
	}
	if (st < 0)
		return st;
	if (n < 14 || n > sizeof r)
		return S4D_EPROTO;
	c->ps = get32(r + 2), c->max_frame = get32(r + 6), c->max_batch = get32(r + 10);
	if (c->ps == 0 || c->max_batch == 0 || c->max_frame < 1024)
		return S4D_EPROTO;
	c->next_id = 1;
	return 0;
}

// stale says whether the daemon ended the connection since the last
// answer (its idle timeout, a restart): between requests nothing is due to
// arrive, so anything readable is the end of the stream (or a frame nobody
// asked for). A poll that does not wait, so an idle handle costs nothing.
static int stale(int fd) {
	struct pollfd p = {.fd = fd, .events = POLLIN | POLLRDHUP};
	return poll(&p, 1, 0) != 0;
}

static int ensure(s4d *c) {
	if (c->fd >= 0 && !stale(c->fd))
		return 0;
	drop(c);
	c->fd = s4d_dial(c->path);
	if (c->fd < 0) {
		snprintf(c->msg, sizeof c->msg, "s4d is not reachable at %s (%s); start it with 'systemctl start s4d' or "
		         "'s4d daemon --socket %s'", c->path, strerror(errno), c->path);
		return S4D_ECONNECT;
	}
	if (c->timeout_ms > 0) {
		struct timeval tv = {c->timeout_ms / 1000, (c->timeout_ms % 1000) * 1000};
		setsockopt(c->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
		setsockopt(c->fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
	}
	int rc = hello(c);
	if (rc) {
		drop(c);
		if (rc < 0)
			snprintf(c->msg, sizeof c->msg, "HELLO: %s", s4d_strerror(rc));
	}
	return rc;
}

// Why the last s4d_connect of this thread failed: s4d_message(NULL).
static __thread char connect_msg[512];

S4D_API s4d *s4d_connect(const char *socket, int *err) {
	if (!socket || !*socket)
		socket = getenv("S4D_SOCKET");
	if (!socket || !*socket)
		socket = S4D_DEFAULT_SOCKET;
	int rc = S4D_EINVAL;
	s4d *c = calloc(1, sizeof *c);
	if (!c) {
		rc = S4D_ENOMEM;
	} else if (strlen(socket) < sizeof c->path) {
		pthread_mutex_init(&c->mu, NULL);
		strcpy(c->path, socket);
		c->fd = -1;
		if ((rc = ensure(c)) == 0) {
			if (err)
				*err = 0;
			return c;
		}
		snprintf(connect_msg, sizeof connect_msg, "%s", c->msg);
	}
	if (err)
		*err = rc;
	free(c);
	return NULL;
}

S4D_API void s4d_close(s4d *c) {
	if (!c)
		return;
	drop(c);
	pthread_mutex_destroy(&c->mu);
	free(c);
}

S4D_API const char *s4d_message(const s4d *c) { return c ? c->msg : connect_msg; }
S4D_API uint32_t s4d_page_size(const s4d *c) { return c ? c->ps : 0; }
S4D_API uint32_t s4d_max_batch(const s4d *c) { return c ? c->max_batch : 0; }

S4D_API int s4d_set_timeout(s4d *c, int ms) {
	if (!c || ms < 0)
		return S4D_EINVAL;
	pthread_mutex_lock(&c->mu);
	c->timeout_ms = ms;
	drop(c); // the next connection carries the new timeout
	pthread_mutex_unlock(&c->mu);
	return 0;
}

// request sends one request on the handle's connection and reads the
// answer's header; a positive return is an error status (message read).
static int request(s4d *c, int op, struct iovec *iov, int niov, const int *fds, int nfds, size_t *blen) {
	uint64_t id = ++c->next_id;
	int rc = send_frame(c->fd, op, id, iov, niov, fds, nfds), status = 0;
	if (rc == 0)
		rc = recv_head(c->fd, op, id, &status, blen);
	if (rc)
		return fail(c, rc, "request");
	if (status) {
		rc = refused(c, status, *blen);
		if (status == S4D_LIMIT || status == S4D_VERSION || status == S4D_TOO_LARGE)
			drop(c); // these may come with the connection's end
		return rc;
	}
	return 0;
}

// codes reads the `u32 n, n statuses` answer into st (or, when NULL, only
// looks at them), notes the first that is not OK (NOT_FOUND tolerated
// when skip_missing) and counts the OK ones in *ok.
static int codes(s4d *c, size_t blen, size_t n, uint8_t *st, int skip_missing, size_t *ok) {
	unsigned char b[4096];
	int rc, first = 0;
	if (blen != 4 + n)
		return fail(c, S4D_EPROTO, "batch answer");
	if ((rc = recv_all(c->fd, b, 4)))
		return fail(c, rc, "batch answer");
	if (get32(b) != n)
		return fail(c, S4D_EPROTO, "batch answer");
	for (size_t i = 0; i < n;) {
		size_t k = n - i < sizeof b ? n - i : sizeof b;
		if ((rc = recv_all(c->fd, b, k)))
			return fail(c, rc, "batch answer");
		for (size_t j = 0; j < k; j++) {
			if (b[j] == S4D_OK && ok)
				(*ok)++;
			if (b[j] != S4D_OK && !first && !(skip_missing && b[j] == S4D_NOT_FOUND))
				first = b[j];
		}
		if (st)
			memcpy(st + i, b, k);
		i += k;
	}
	if (first && !c->page_first) {
		c->page_first = first;
		snprintf(c->msg, sizeof c->msg, "a page's status is %s", s4d_strerror(first));
	}
	return 0;
}

static int check(s4d *c, const char *pool, const uint64_t *keys, size_t n, unsigned char *head, size_t *plen) {
	size_t l = pool ? strlen(pool) : 0;
	if (!c || !pool || !keys || n == 0 || l > 0xFFFF)
		return S4D_EINVAL;
	head[0] = l & 0xFF, head[1] = l >> 8;
	*plen = l;
	return 0;
}

// batch runs f over keys in requests the daemon's limits allow (put: with
// pages in the frame), stopping at an error of a whole request; per-page
// failures go on, the first one returned at the end.
typedef int (*piece_fn)(s4d *c, const char *pool, size_t plen, const uint64_t *keys, size_t n, size_t first, void *arg);

static int batch(s4d *c, const char *pool, const uint64_t *keys, size_t n, int put, piece_fn f, void *arg) {
	unsigned char head[2];
	size_t plen;
	int rc = check(c, pool, keys, n, head, &plen);
	if (rc)
		return rc;
	pthread_mutex_lock(&c->mu);
	c->msg[0] = 0;
	c->page_first = 0;
	if ((rc = ensure(c)) == 0) {
		size_t per = c->max_batch;
		if (put) {
			size_t room = (c->max_frame - 16 - 2 - plen - 8) / ((size_t)c->ps + 8);
			per = room < per ? room : per;
			if (per == 0)
				per = 1;
		}
		for (size_t i = 0; i < n && rc == 0; i += per) {
			rc = f(c, pool, plen, keys + i, n - i < per ? n - i : per, i, arg);
			if (rc > 0 && !c->msg[0])
				snprintf(c->msg, sizeof c->msg, "%s", s4d_strerror(rc));
		}
		if (rc == 0)
			rc = c->page_first;
	}
	pthread_mutex_unlock(&c->mu);
	return rc;
}

struct put_arg {
	const unsigned char *pages;
	uint8_t *st;
};

static int put_piece(s4d *c, const char *pool, size_t plen, const uint64_t *keys, size_t n, size_t first, void *arg) {
	struct put_arg *a = arg;
	unsigned char h[2 + 0xFFFF + 8], *p = h;
	p[0] = plen & 0xFF, p[1] = plen >> 8;
	memcpy(p + 2, pool, plen);
	put32(p + 2 + plen, c->ps);
	put32(p + 6 + plen, (uint32_t)n);
	struct iovec iov[3] = {{h, 10 + plen}, {(void *)keys, n * 8}, {(void *)(a->pages + first * c->ps), n * c->ps}};
	size_t blen;
	int rc = request(c, S4D_OP_PUT, iov, 3, NULL, 0, &blen);
	return rc ? rc : codes(c, blen, n, a->st ? a->st + first : NULL, 0, NULL);
}

S4D_API int s4d_put(s4d *c, const char *pool, const uint64_t *keys, size_t n, const void *pages, uint8_t *statuses) {
	if (!pages)
		return S4D_EINVAL;
	struct put_arg a = {pages, statuses};
	return batch(c, pool, keys, n, 1, put_piece, &a);
}

struct get_arg {
	unsigned char *dst;
	uint8_t *st;
};

// get_piece receives the pages that came straight into dst, back to back,
// then moves each to its key's place, backwards so that none is
// overwritten before it moved, and zeroes the places of those that did not.
static int get_piece(s4d *c, const char *pool, size_t plen, const uint64_t *keys, size_t n, size_t first, void *arg) {
	struct get_arg *a = arg;
	unsigned char h[2 + 0xFFFF + 4];
	if (plen > sizeof h - 6)
		return S4D_EINVAL;
	h[0] = plen & 0xFF, h[1] = plen >> 8;
	memcpy(h + 2, pool, plen);
	put32(h + 2 + plen, (uint32_t)n);
	struct iovec iov[2] = {{h, 6 + plen}, {(void *)keys, n * 8}};
	size_t blen;
	int rc = request(c, S4D_OP_GET, iov, 2, NULL, 0, &blen);
	if (rc)
		return rc;
	uint8_t *st = a->st ? a->st + first : malloc(n);
	if (!st)
		return fail(c, S4D_ELOST, "out of memory for a GET answer"); // the answer stays unread
	unsigned char b[8];
	size_t ps = c->ps, ok = 0;
	unsigned char *dst = a->dst + first * ps;
	if ((rc = blen < 8 + n ? S4D_EPROTO : recv_all(c->fd, b, 8)) == 0 && (get32(b) != ps || get32(b + 4) != n))
		rc = S4D_EPROTO;
	if (rc == 0)
		rc = recv_all(c->fd, st, n);
	for (size_t i = 0; rc == 0 && i < n; i++)
		ok += st[i] == S4D_OK;
	if (rc == 0 && blen != 8 + n + ok * ps)
		rc = S4D_EPROTO;
	if (rc == 0)
		rc = recv_all(c->fd, dst, ok * ps);
	if (rc) {
		if (!a->st)
			free(st);
		return fail(c, rc, "GET answer");
	}
	size_t j = ok;
	for (size_t i = n; i-- > 0;) {
		if (st[i] == S4D_OK) {
			j--;
			if (j != i)
				memmove(dst + i * ps, dst + j * ps, ps);
		} else {
			memset(dst + i * ps, 0, ps);
			if (!c->page_first)
				c->page_first = st[i];
		}
	}
	if (!a->st)
		free(st);
	return 0;
}

S4D_API int s4d_get_into(s4d *c, const char *pool, const uint64_t *keys, size_t n, void *dst, uint8_t *statuses) {
	if (!dst)
		return S4D_EINVAL;
	struct get_arg a = {dst, statuses};
	return batch(c, pool, keys, n, 0, get_piece, &a);
}

S4D_API int s4d_get(s4d *c, const char *pool, const uint64_t *keys, size_t n, void **pages, uint8_t *statuses) {
	if (!c || !pages)
		return S4D_EINVAL;
	*pages = NULL;
	pthread_mutex_lock(&c->mu);
	int rc = ensure(c);
	pthread_mutex_unlock(&c->mu);
	if (rc)
		return rc;
	if (n > SIZE_MAX / c->ps)
		return S4D_EINVAL;
	void *p = malloc(n * c->ps + 1);
	if (!p)
		return S4D_ENOMEM;
	rc = s4d_get_into(c, pool, keys, n, p, statuses);
	if (rc < 0 || (rc > 0 && rc != S4D_NOT_FOUND && rc != S4D_CORRUPT && rc != S4D_FAILED)) {
		free(p);
		return rc;
	}
	*pages = p;
	return rc;
}

static int del_piece(s4d *c, const char *pool, size_t plen, const uint64_t *keys, size_t n, size_t first, void *arg) {
	(void)first;
	unsigned char h[2 + 0xFFFF + 4];
	h[0] = plen & 0xFF, h[1] = plen >> 8;
	memcpy(h + 2, pool, plen);
	put32(h + 2 + plen, (uint32_t)n);
	struct iovec iov[2] = {{h, 6 + plen}, {(void *)keys, n * 8}};
	size_t blen;
	int rc = request(c, S4D_OP_DEL, iov, 2, NULL, 0, &blen);
	return rc ? rc : codes(c, blen, n, NULL, 1, arg);
}

S4D_API int s4d_delete(s4d *c, const char *pool, const uint64_t *keys, size_t n, size_t *deleted) {
	size_t ok = 0;
	int rc = batch(c, pool, keys, n, 0, del_piece, &ok);
	if (deleted)
		*deleted = ok;
	return rc;
}

S4D_API int s4d_stats(s4d *c, const char *pool, char **json) {
	if (!c || !json)
		return S4D_EINVAL;
	*json = NULL;
	size_t l = pool ? strlen(pool) : 0;
	if (l > 0xFFFF)
		return S4D_EINVAL;
	unsigned char h[2] = {l & 0xFF, l >> 8};
	struct iovec iov[2] = {{h, 2}, {(void *)pool, l}};
	size_t blen;
	pthread_mutex_lock(&c->mu);
	c->msg[0] = 0;
	int rc = ensure(c);
	if (rc == 0)
		rc = request(c, S4D_OP_STATS, iov, l ? 2 : 1, NULL, 0, &blen);
	if (rc == 0) {
		char *j = malloc(blen + 1);
		if (!j)
			rc = fail(c, S4D_ELOST, "out of memory for STATS");
		else if ((rc = recv_all(c->fd, j, blen)) != 0)
			free(j), rc = fail(c, rc, "STATS answer");
		else
			j[blen] = 0, *json = j;
	}
	pthread_mutex_unlock(&c->mu);
	return rc;
}

S4D_API int s4d_buffer_alloc(size_t size, s4d_buffer *b) {
	if (!b || size == 0)
		return S4D_EINVAL;
	*b = (s4d_buffer){NULL, 0, -1};
	int fd = memfd_create("s4d-pages", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0)
		return S4D_ENOMEM;
	// The daemon refuses a file that could shrink under its mapping.
	if (ftruncate(fd, size) != 0 || fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
		close(fd);
		return S4D_ENOMEM;
	}
	void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED) {
		close(fd);
		return S4D_ENOMEM;
	}
	*b = (s4d_buffer){p, size, fd};
	return 0;
}

S4D_API void s4d_buffer_free(s4d_buffer *b) {
	if (!b || b->fd < 0)
		return;
	munmap(b->data, b->size);
	close(b->fd);
	*b = (s4d_buffer){NULL, 0, -1};
}

struct fd_arg {
	int op;
	const s4d_buffer *b;
	size_t off;
	uint8_t *st;
};

static int fd_piece(s4d *c, const char *pool, size_t plen, const uint64_t *keys, size_t n, size_t first, void *arg) {
	struct fd_arg *a = arg;
	unsigned char h[2 + 0xFFFF + 8], t[8];
	h[0] = plen & 0xFF, h[1] = plen >> 8;
	memcpy(h + 2, pool, plen);
	put32(h + 2 + plen, c->ps);
	put32(h + 6 + plen, (uint32_t)n);
	put64(t, a->off + first * c->ps);
	struct iovec iov[3] = {{h, 10 + plen}, {(void *)keys, n * 8}, {t, 8}};
	size_t blen;
	int rc = request(c, a->op, iov, 3, &a->b->fd, 1, &blen);
	return rc ? rc : codes(c, blen, n, a->st ? a->st + first : NULL, 0, NULL);
}

static int fd_op(s4d *c, int op, const char *pool, const uint64_t *keys, size_t n, const s4d_buffer *b, size_t off, uint8_t *st) {
	if (!c || !b || b->fd < 0)
		return S4D_EINVAL;
	pthread_mutex_lock(&c->mu);
	int rc = ensure(c);
	pthread_mutex_unlock(&c->mu);
	if (rc)
		return rc;
	if (off > b->size || n > (b->size - off) / c->ps) {
		snprintf(c->msg, sizeof c->msg, "%zu pages of %u bytes at %zu do not fit in a buffer of %zu", n, c->ps, off, b->size);
		return S4D_EINVAL;
	}
	struct fd_arg a = {op, b, off, st};
	return batch(c, pool, keys, n, 0, fd_piece, &a);
}

S4D_API int s4d_put_buffer(s4d *c, const char *pool, const uint64_t *keys, size_t n, const s4d_buffer *b, size_t off, uint8_t *statuses) {
	return fd_op(c, S4D_OP_PUT_FD, pool, keys, n, b, off, statuses);
}

S4D_API int s4d_get_buffer(s4d *c, const char *pool, const uint64_t *keys, size_t n, const s4d_buffer *b, size_t off, uint8_t *statuses) {
	return fd_op(c, S4D_OP_GET_FD, pool, keys, n, b, off, statuses);
}
