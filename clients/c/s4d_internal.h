// Internal to libs4d: what s4d.c shares with s4d_frame.c.
#ifndef S4D_INTERNAL_H
#define S4D_INTERNAL_H
#include "s4d.h"

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/un.h>

// The preload library includes s4d_frame.c and makes these static.
#ifndef S4D_LOCAL
#define S4D_LOCAL __attribute__((visibility("hidden")))
#endif

#define S4D_OP_HELLO 1
#define S4D_OP_PUT 2
#define S4D_OP_GET 3
#define S4D_OP_DEL 4
#define S4D_OP_STATS 6
#define S4D_OP_PUT_FD 9
#define S4D_OP_GET_FD 10
#define S4D_HELLO_MAGIC 0x50443453u

struct s4d {
	pthread_mutex_t mu;
	int fd, timeout_ms;
	char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
	uint32_t ps, max_frame, max_batch;
	uint64_t next_id;
	int page_first; // the first failed page's status in a batch
	char msg[512];
};


S4D_LOCAL void put32(unsigned char *p, uint32_t v);
S4D_LOCAL void put64(unsigned char *p, uint64_t v);
S4D_LOCAL uint32_t get32(const unsigned char *p);
S4D_LOCAL uint64_t get64(const unsigned char *p);
S4D_LOCAL int io_error(void);
S4D_LOCAL int send_frame(int fd, int op, uint64_t id, struct iovec *body, int niov, const int *fds, int nfds);
S4D_LOCAL int recv_all(int fd, void *buf, size_t n);
S4D_LOCAL int discard(int fd, size_t n);
S4D_LOCAL int recv_head(int fd, int op, uint64_t id, int *status, size_t *blen);
#endif
