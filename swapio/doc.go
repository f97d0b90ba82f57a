// Package swapio is swap's I/O path outside the Go runtime (issue 40): a
// request the kernel makes while reclaiming memory must be served without
// needing memory, and the Go runtime may need some at any time (heap
// growth, metadata, a P after a system call). So the path is C:
//
//   - store.c: the store, shaped like zram's: a flat table of 16-byte
//     slots indexed by block; zero and same-filled pages held in the slot;
//     others compressed with the system's liblz4 (dlopen of liblz4.so.1,
//     a dependency of the .deb) into size-classed objects (64-byte steps
//     to 3 KiB, then raw pages) in 64 KiB slabs; a 32-bit hash of each
//     page checked on every read. Slabs come from a ring the refill
//     fills; a write that finds none is refused with ENOMEM and wakes the
//     refill through an eventfd, the one system call the path makes
//     besides io_uring's.
//   - queue.c holds such a write (its tag unanswered, the page under
//     writeback) and tries it again when the store has room, failing it
//     after HoldWrites: failed at once, the kernel sent it again at once
//     and reclaim spun while the refill could not get its page.
//   - queue.c: the ublk queue threads (pthreads made from C), each with
//     its io_uring, serving FETCH/COMMIT_AND_FETCH from the store.
//   - refill.c: the refill, a C thread too (its memory locked, real-time
//     where allowed: refill.c says why), which maps arena memory, locks
//     it a slab at a time into the ring, sizes the reserve (doubled while
//     writes find it empty, halved back after calm) and gives back what
//     a shrunk reserve or discards left over.
//   - writeback.c: with a memory limit, a C thread that moves the
//     coldest pages (a second-chance clock over the slots) whole to a
//     file or block device opened O_DIRECT; the queue reads them back with
//     an io_uring read of its own into the request's buffer and checks
//     the hash when it is in (queue.c), so the I/O path makes no other
//     system call for them.
//
// Once serving, the C side allocates nothing, takes only its own spin
// locks (held for a few instructions, never across a wait), and never
// calls into Go. Go keeps the control plane: it maps and locks the
// store's tables (only those: no mlockall of the runtime), starts and
// stops the refill, reads the counters, and gives everything back at
// Close.
package swapio
