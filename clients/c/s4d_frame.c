// libs4d's frame layer (s4d.h): frames sent and read on a Unix socket,
// descriptors attached. It allocates nothing, so that the preload library
// of `s4d run`, which includes this file, can call it from inside malloc.
#define _GNU_SOURCE
#include "s4d_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <unistd.h>

#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "libs4d sends keys as they lie in memory: little-endian hosts only"
#endif

static const char *const status_text[] = {
	"OK", "malformed request", "protocol version not supported", "unknown operation",
	"page size differs from the daemon's", "empty batch", "a key appears twice in one batch",
	"not found", "the pool belongs to another user", "no space: the memory limit refused the page",
	"too large", "bad pool name", "internal fault in the daemon", "the daemon is shutting down",
	"the pages could not be compressed or decompressed", "stored data failed its integrity check",
	"a configured limit was reached", "the daemon is busy; retry",
};

S4D_FRAME_API const char *s4d_strerror(int code) {
	switch (code) {
	case S4D_ECONNECT: return "cannot connect to the s4d daemon";
	case S4D_ELOST: return "connection to the s4d daemon lost";
	case S4D_EINVAL: return "invalid argument";
	case S4D_ENOMEM: return "out of memory";
	case S4D_EPROTO: return "unexpected answer from the daemon";
	case S4D_ETIMEDOUT: return "the daemon did not answer in time";
	}
	if (code >= 0 && code < (int)(sizeof status_text / sizeof *status_text))
		return status_text[code];
	return "unknown status";
}

S4D_LOCAL void put32(unsigned char *p, uint32_t v) { memcpy(p, &v, 4); }
S4D_LOCAL void put64(unsigned char *p, uint64_t v) { memcpy(p, &v, 8); }
S4D_LOCAL uint32_t get32(const unsigned char *p) { uint32_t v; memcpy(&v, p, 4); return v; }
S4D_LOCAL uint64_t get64(const unsigned char *p) { uint64_t v; memcpy(&v, p, 8); return v; }

S4D_LOCAL int io_error(void) {
	return errno == EAGAIN || errno == EWOULDBLOCK ? S4D_ETIMEDOUT : S4D_ELOST;
}

// send_frame sends the header and body pieces, the descriptors with the
// first byte, in as few sendmsg calls as the socket takes.
S4D_LOCAL int send_frame(int fd, int op, uint64_t id, struct iovec *body, int niov, const int *fds, int nfds) {
	unsigned char h[20] = {0};
	struct iovec iov[8];
	size_t total = 0;
	if (niov > 7 || nfds > 4)
		return S4D_EINVAL;
	for (int i = 0; i < niov; i++)
		total += body[i].iov_len;
	if (total > 0xFFFFFFFFu - 16)
		return S4D_EINVAL;
	put32(h, 16 + (uint32_t)total);
	h[4] = 1, h[5] = (unsigned char)op;
	put64(h + 12, id);
	iov[0] = (struct iovec){h, 20};
	memcpy(iov + 1, body, niov * sizeof *body);
	int n = niov + 1;
	struct iovec *v = iov;
	union {
		char buf[CMSG_SPACE(4 * sizeof(int))];
		struct cmsghdr align;
	} u;
	int first = 1;
	while (n > 0) {
		struct msghdr m = {.msg_iov = v, .msg_iovlen = n};
		if (first && nfds > 0) {
			m.msg_control = u.buf, m.msg_controllen = CMSG_SPACE(nfds * sizeof(int));
			struct cmsghdr *c = CMSG_FIRSTHDR(&m);
			c->cmsg_level = SOL_SOCKET, c->cmsg_type = SCM_RIGHTS, c->cmsg_len = CMSG_LEN(nfds * sizeof(int));
			memcpy(CMSG_DATA(c), fds, nfds * sizeof(int));
		}
		ssize_t s = sendmsg(fd, &m, MSG_NOSIGNAL);
		if (s < 0) {
			if (errno == EINTR)
				continue;
			return io_error();
		}
		first = 0;
		while (n > 0 && (size_t)s >= v->iov_len)
			s -= v->iov_len, v++, n--;
		if (n > 0)
			v->iov_base = (char *)v->iov_base + s, v->iov_len -= s;
	}
	return 0;
}

S4D_LOCAL int recv_all(int fd, void *buf, size_t n) {
	size_t got = 0;
	while (got < n) {
		ssize_t r = recv(fd, (char *)buf + got, n - got, 0);
		if (r == 0)
			return S4D_ELOST;
		if (r < 0) {
			if (errno == EINTR)
				continue;
			return io_error();
		}
		got += r;
	}
	return 0;
}

S4D_LOCAL int discard(int fd, size_t n) {
	unsigned char b[4096];
	while (n > 0) {
		size_t k = n < sizeof b ? n : sizeof b;
		int rc = recv_all(fd, b, k);
		if (rc)
			return rc;
		n -= k;
	}
	return 0;
}

// recv_head reads an answer's header, checks that it answers op/id and
// returns its status and body length.
S4D_LOCAL int recv_head(int fd, int op, uint64_t id, int *status, size_t *blen) {
	unsigned char h[20];
	int rc = recv_all(fd, h, 20);
	if (rc)
		return rc;
	uint32_t len = get32(h);
	if (len < 16 || h[4] != 1 || !(h[8] & 1))
		return S4D_EPROTO;
	*status = h[6] | h[7] << 8;
	*blen = len - 16;
	// A refusal (LIMIT) comes as op 0, id 0 before the connection closes.
	if (h[5] == 0 && get64(h + 12) == 0 && *status != 0)
		return 0;
	if (h[5] != op || get64(h + 12) != id)
		return S4D_EPROTO;
	return 0;
}

S4D_FRAME_API int s4d_dial(const char *path) {
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	if (!path || strlen(path) >= sizeof a.sun_path) {
		errno = ENAMETOOLONG;
		return -1;
	}
	strcpy(a.sun_path, path);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
		int e = errno;
		close(fd);
		errno = e;
		return -1;
	}
	return fd;
}

S4D_FRAME_API int s4d_exchange(int fd, int op, const void *body, size_t blen, const int *fds, int nfds,
                         void *resp, size_t cap, size_t *rlen) {
	struct iovec iov = {(void *)body, blen};
	int rc = send_frame(fd, op, 1, &iov, blen ? 1 : 0, fds, nfds), status;
	size_t n;
	if (rc || (rc = recv_head(fd, op, 1, &status, &n)))
		return rc;
	size_t k = n < cap ? n : cap;
	if (k && (rc = recv_all(fd, resp, k)))
		return rc;
	if (rlen)
		*rlen = n;
	if (n > k && (rc = discard(fd, n - k)))
		return rc;
	return status;
}

