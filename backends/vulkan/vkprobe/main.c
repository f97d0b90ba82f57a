/* vkprobe: issue 41's decision spike. Does the Vulkan driver import a
 * client's sealed memfd mapping (VK_EXT_external_memory_host; a udmabuf
 * dma-buf; anonymous memory), and how fast and at what CPU cost do pages
 * move between imported host memory and the GPU, against the staging copy
 * a webgpu.h implementation makes? Output: key=value lines.
 *
 * usage: vkprobe [-s MiB] [-r repeats] [-d device] [-q]
 *   -s  bytes moved per pass and size of each host mapping (default 1024)
 *   -r  timed passes per configuration (default 5; one untimed pass first)
 *   -d  physical device index (default: the first that is not a CPU)
 *   -q  quick: fewer configurations (lavapipe)
 * exit: 0 done, 1 a failure (a round trip that came back wrong included),
 *       77 no Vulkan here (a test skips). */
#define _GNU_SOURCE
#include "vk.h"
#include "xfer.h"
#include "gather.h"
#include <errno.h>
#include <fcntl.h>
#include <linux/udmabuf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#define MiB ((size_t)1 << 20)

/* A client's memory as the daemon sees it: a sealed memfd the client
 * wrote through its own mapping (rw), mapped again read-only (ro) the way
 * clientmem maps a PUT's pages. */
struct host {
	int fd;
	size_t size;
	char *rw, *ro;
};

static int host_memfd(size_t size, uint64_t seed, struct host *h)
{
	memset(h, 0, sizeof *h);
	h->size = size;
	h->fd = memfd_create("s4d-vkprobe", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (h->fd < 0 || ftruncate(h->fd, (off_t)size))
		return -1;
	h->rw = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, h->fd, 0);
	if (h->rw == MAP_FAILED)
		return -1;
	uint64_t *w = (uint64_t *)h->rw;
	for (size_t i = 0; i < size / 8; i++)
		w[i] = (i * 0x9E3779B97F4A7C15ull) ^ seed;
	/* The seals the Go client sets (client/memfd.go). */
	if (fcntl(h->fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL))
		return -1;
	h->ro = mmap(NULL, size, PROT_READ, MAP_SHARED, h->fd, 0);
	return h->ro == MAP_FAILED ? -1 : 0;
}

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

/* cpu returns the process's user+system seconds: every thread, the
 * driver's own included, as a daemon's CPU would be counted. */
static double cpu(void)
{
	struct rusage r;
	getrusage(RUSAGE_SELF, &r);
	return r.ru_utime.tv_sec + r.ru_utime.tv_usec / 1e6 + r.ru_stime.tv_sec + r.ru_stime.tv_usec / 1e6;
}

static void import_line(struct vkdev *d, const char *kind, void *p, size_t size, struct vkbuf *keep)
{
	struct vkbuf b;
	uint32_t bits;
	double t0 = now();
	VkResult r = vk_import_host(d, p, size, &b, &bits);
	double t1 = now();
	printf("import kind=%s bytes=%zu result=%s typebits=0x%x import_ms=%.2f", kind, size, vk_result(r), bits, (t1 - t0) * 1e3);
	if (r == VK_SUCCESS && !keep) {
		t0 = now();
		vk_free_buffer(d, &b);
		printf(" release_ms=%.2f", (now() - t0) * 1e3);
	} else if (r == VK_SUCCESS) {
		*keep = b;
	} else {
		vk_free_buffer(d, &b);
	}
	printf("\n");
}

/* udmabuf_line turns a fresh sealed memfd into a dma-buf (udmabuf wants
 * F_SEAL_SHRINK and no F_SEAL_WRITE) and imports it. */
static void udmabuf_line(struct vkdev *d, size_t size)
{
	int dev = open("/dev/udmabuf", O_RDWR | O_CLOEXEC);
	if (dev < 0) {
		printf("import kind=udmabuf result=unavailable why=\"/dev/udmabuf: %s\"\n", strerror(errno));
		return;
	}
	struct host h;
	if (host_memfd(size, 7, &h)) {
		printf("import kind=udmabuf result=unavailable why=\"memfd: %s\"\n", strerror(errno));
		close(dev);
		return;
	}
	struct udmabuf_create c = {.memfd = (uint32_t)h.fd, .flags = UDMABUF_FLAGS_CLOEXEC, .offset = 0, .size = size};
	int dfd = ioctl(dev, UDMABUF_CREATE, &c);
	if (dfd < 0) {
		printf("import kind=udmabuf result=unavailable why=\"UDMABUF_CREATE: %s\"\n", strerror(errno));
	} else {
		struct vkbuf b;
		uint32_t bits;
		double t0 = now();
		VkResult r = vk_import_dmabuf(d, dfd, size, &b, &bits);
		printf("import kind=udmabuf bytes=%zu result=%s typebits=0x%x import_ms=%.2f\n", size, vk_result(r), bits, (now() - t0) * 1e3);
		vk_free_buffer(d, &b);
		close(dfd);
	}
	munmap(h.rw, size);
	munmap(h.ro, size);
	close(h.fd);
	close(dev);
}

struct cfg {
	int import, transfer, nq, depth;
	size_t batch, region;
	int threads, poll;
};

static int cmpd(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof *v, cmpd);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* report prints one configuration's line: GB/s median and range, and
 * the median CPU seconds per GB. */
static void report(const char *head, double *gbps, double *cps, int n)
{
	double lo = 1e30, hi = 0;
	for (int i = 0; i < n; i++) {
		lo = gbps[i] < lo ? gbps[i] : lo;
		hi = gbps[i] > hi ? gbps[i] : hi;
	}
	printf("%s GBps_med=%.2f GBps_min=%.2f GBps_max=%.2f core_s_per_GB_med=%.4f\n", head, median(gbps, n), lo, hi, median(cps, n));
}

/* run_cfg times reps passes each way; prints one line per direction. */
static int run_cfg(struct vkdev *d, struct cfg c, size_t total, int reps, struct vkbuf *up, struct vkbuf *down,
		   struct host *a, struct host *b, struct vkbuf *dev)
{
	if (c.batch > total)
		c.batch = total;
	struct xfer x;
	struct vkbuf stage = {0};
	int rc = -1;
	if (xfer_init(&x, d, c.transfer, c.nq, c.depth, c.batch, c.region))
		goto out;
	if (!c.import && vk_staging_buffer(d, (VkDeviceSize)c.batch * x.depth, &stage))
		goto out;
	for (int upload = 1; upload >= 0; upload--) {
		double gbps[64], cps[64];
		int n = reps > 64 ? 64 : reps;
		for (int i = -1; i < n; i++) {
			double t0 = now(), c0 = cpu();
			int r = c.import ? xfer_pass(&x, upload, total, upload ? up : down, NULL, NULL, dev, 0, c.poll)
					 : xfer_pass(&x, upload, total, NULL, upload ? a->ro : b->rw, &stage, dev, c.threads, c.poll);
			if (r)
				goto out;
			double t = now() - t0, cs = cpu() - c0;
			if (i >= 0) {
				gbps[i] = total / t / 1e9;
				cps[i] = cs / (total / 1e9);
			}
		}
		char head[256];
		snprintf(head, sizeof head, "xfer path=%s dir=%s family=%s queues=%u depth=%d batch_mib=%zu region=%zu threads=%d wait=%s",
			 c.import ? "import" : "staging", upload ? "up" : "down", c.transfer ? "transfer" : "compute", x.nq, x.depth,
			 c.batch / MiB, x.region, c.import ? 0 : (c.threads ? c.threads : 1), c.poll ? "poll" : "block");
		report(head, gbps, cps, n);
		fflush(stdout);
	}
	rc = 0;
out:
	if (rc)
		printf("xfer path=%s failed\n", c.import ? "import" : "staging");
	vk_free_buffer(d, &stage);
	xfer_free(&x);
	return rc;
}

/* run_gather moves the pages through the gather shader, in order and
 * shuffled, after checking that a shuffled round trip comes back right. */
static int run_gather(struct vkdev *d, size_t total, int reps, struct vkbuf *up, struct vkbuf *down, struct host *a,
		      struct host *b, struct vkbuf *dev)
{
	struct gather g;
	struct xfer x;
	int rc = -1;
	memset(&x, 0, sizeof x);
	size_t batch = total < 16 * MiB ? total : 16 * MiB;
	if (gather_init(&g, d, up, down, dev, total) || xfer_init(&x, d, 0, 1, 4, batch, 0)) {
		printf("gather setup failed\n");
		goto out;
	}
	x.stage = VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT;
	/* The device must hold the pages in table order (a shader that
	 * ignored the table would round-trip too): read it back with plain
	 * copies and compare page by page, then scatter it back. */
	struct xfer cx;
	gather_table(&g, 1);
	memset(b->rw, 0, total);
	int ok = !gather_pass(&g, &x, 1, total, 0) && !xfer_init(&cx, d, 1, 1, 4, batch, 0);
	ok = ok && !xfer_pass(&cx, 0, total, down, NULL, NULL, dev, 0, 0);
	xfer_free(&cx);
	const uint32_t *tab = g.tab.host;
	for (size_t j = 0; ok && j < total / 4096; j++)
		ok = !memcmp(b->rw + j * 4096, a->rw + (size_t)tab[j] * 4096, 4096);
	memset(b->rw, 0, total);
	ok = ok && !gather_pass(&g, &x, 0, total, 0) && !memcmp(a->rw, b->rw, total);
	printf("verify path=gather order=shuffled bytes=%zu %s\n", total, ok ? "ok" : "MISMATCH");
	if (!ok)
		goto out;
	for (int shuffle = 0; shuffle <= 1; shuffle++) {
		gather_table(&g, shuffle);
		for (int upload = 1; upload >= 0; upload--) {
			double gbps[64], cps[64];
			int n = reps > 64 ? 64 : reps;
			for (int i = -1; i < n; i++) {
				double t0 = now(), c0 = cpu();
				if (gather_pass(&g, &x, upload, total, 0))
					goto out;
				if (i >= 0) {
					gbps[i] = total / (now() - t0) / 1e9;
					cps[i] = (cpu() - c0) / (total / 1e9);
				}
			}
			char head[256];
			snprintf(head, sizeof head, "xfer path=gather order=%s dir=%s family=compute queues=1 depth=%d batch_mib=%zu region=4096 threads=0 wait=block",
				 shuffle ? "shuffled" : "inorder", upload ? "up" : "down", x.depth, batch / MiB);
			report(head, gbps, cps, n);
		}
	}
	rc = 0;
out:
	xfer_free(&x);
	gather_free(&g);
	return rc;
}

/* roundtrip uploads a's pages and downloads them into b (both imported,
 * or both through staging), then compares: a transfer that moves the
 * wrong bytes fast would otherwise pass for a result. */
static int roundtrip(struct vkdev *d, int import, size_t total, struct vkbuf *up, struct vkbuf *down,
		     struct host *a, struct host *b, struct vkbuf *dev)
{
	struct cfg c = {.import = import, .transfer = 1, .nq = 1, .depth = 4, .batch = 16 * MiB, .threads = 2};
	if (c.batch > total)
		c.batch = total;
	memset(b->rw, 0, total);
	struct xfer x;
	struct vkbuf stage = {0};
	int ok = 0;
	if (!xfer_init(&x, d, 1, 1, c.depth, c.batch, 0) &&
	    (import || !vk_staging_buffer(d, (VkDeviceSize)c.batch * x.depth, &stage))) {
		ok = import ? !xfer_pass(&x, 1, total, up, NULL, NULL, dev, 0, 0) && !xfer_pass(&x, 0, total, down, NULL, NULL, dev, 0, 0)
			    : !xfer_pass(&x, 1, total, NULL, a->ro, &stage, dev, 2, 0) && !xfer_pass(&x, 0, total, NULL, b->rw, &stage, dev, 2, 0);
	}
	vk_free_buffer(d, &stage);
	xfer_free(&x);
	ok = ok && memcmp(a->rw, b->rw, total) == 0;
	printf("verify path=%s bytes=%zu %s\n", import ? "import" : "staging", total, ok ? "ok" : "MISMATCH");
	return ok ? 0 : -1;
}

int main(int argc, char **argv)
{
	size_t total = 1024 * MiB;
	int reps = 5, index = -1, quick = 0, o;
	while ((o = getopt(argc, argv, "s:r:d:q")) != -1) {
		switch (o) {
		case 's': total = (size_t)atol(optarg) * MiB; break;
		case 'r': reps = atoi(optarg); break;
		case 'd': index = atoi(optarg); break;
		case 'q': quick = 1; break;
		default: fprintf(stderr, "usage: vkprobe [-s MiB] [-r repeats] [-d device] [-q]\n"); return 1;
		}
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	const char *why = NULL;
	struct vkdev d;
	if (vk_load(&why) || vk_open(&d, index, &why)) {
		printf("unavailable: %s\n", why);
		return 77;
	}
	printf("device=\"%s\" driver=\"%s\" driver_version=0x%x vendor=0x%x api=%u.%u.%u cpu_device=%d\n", d.name, d.driver,
	       d.driver_version, d.vendor, VK_API_VERSION_MAJOR(d.api), VK_API_VERSION_MINOR(d.api), VK_API_VERSION_PATCH(d.api), d.cpu);
	printf("VK_EXT_external_memory_host=%d minImportedHostPointerAlignment=%llu dma_buf_import=%d\n", d.has_host_import,
	       (unsigned long long)d.min_align, d.has_dmabuf);
	printf("compute_family=%u compute_queues=%u transfer_family=%u transfer_queues=%u transfer_only_family=%d\n", d.compute_family,
	       d.ncompute, d.transfer_family, d.ntransfer, d.transfer_family != d.compute_family);

	struct host a, b;
	if (host_memfd(total, 1, &a) || host_memfd(total, 2, &b)) {
		printf("memfd of %zu bytes: %s\n", total, strerror(errno));
		return 1;
	}
	char *anon = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (anon == MAP_FAILED)
		return 1;
	memset(anon, 1, total);
	/* Each kind of host memory, imported whole then released; then a page
	 * range inside a mapping, which per-batch imports would need. */
	import_line(&d, "anon", anon, total, NULL);
	import_line(&d, "memfd-rw", a.rw, total, NULL);
	import_line(&d, "memfd-rw-range", a.rw + 4096, 16 * 4096, NULL);
	udmabuf_line(&d, 16 * MiB);
	munmap(anon, total);

	/* The imports the transfers use: the client's writable mapping both
	 * ways (a read-only one is tried last: NVIDIA refuses it, and whether
	 * the device stays usable after a refusal is measured there). */
	struct vkbuf up, down, dev;
	uint32_t bits;
	VkResult r = vk_import_host(&d, a.rw, total, &up, &bits);
	if (r) {
		printf("no import of a memfd mapping (%s): only the staging baseline runs\n", vk_result(r));
		vk_free_buffer(&d, &up);
	}
	int imported = up.mem != VK_NULL_HANDLE;
	if (imported && (r = vk_import_host(&d, b.rw, total, &down, &bits))) {
		printf("download mapping not imported: %s\n", vk_result(r));
		return 1;
	}
	if (vk_device_buffer(&d, total, &dev)) {
		printf("device buffer of %zu bytes not made\n", total);
		return 1;
	}
	printf("upload_source=%s\n", imported ? "memfd-rw" : "none");
	int fail = 0;
	if (imported)
		fail |= roundtrip(&d, 1, total, &up, &down, &a, &b, &dev);
	fail |= roundtrip(&d, 0, total, &up, &down, &a, &b, &dev);

	static const struct cfg full[] = {
	    {1, 1, 1, 4, 16 * MiB, 0, 0, 0},    /* import, transfer queue, s4d's 4096-page batch */
	    {1, 1, 1, 4, 64 * MiB, 0, 0, 0},    /* 16384-page batch */
	    {1, 1, 1, 4, 4 * MiB, 0, 0, 0},     /* 1024-page batch: per-batch cost shows */
	    {1, 1, 2, 8, 16 * MiB, 0, 0, 0},    /* two transfer queues */
	    {1, 0, 1, 4, 16 * MiB, 0, 0, 0},    /* compute queue */
	    {1, 1, 1, 4, 16 * MiB, 4096, 0, 0}, /* one copy region per page (scattered pages) */
	    {1, 1, 1, 4, 16 * MiB, 65536, 0, 0}, /* runs of 16 pages */
	    {1, 1, 1, 4, 16 * MiB, MiB, 0, 0},   /* runs of 256 pages */
	    {1, 1, 1, 4, 16 * MiB, 0, 0, 1},    /* polling wait */
	    {0, 1, 1, 4, 16 * MiB, 0, 1, 0},    /* staging baseline, one copying thread */
	    {0, 1, 1, 4, 16 * MiB, 0, 8, 0},    /* staging, eight threads (Dawn probe's best) */
	    {0, 1, 1, 4, 64 * MiB, 0, 8, 0},
	};
	static const struct cfg small[] = {
	    {1, 1, 1, 4, 16 * MiB, 0, 0, 0},
	    {1, 1, 1, 4, 16 * MiB, 4096, 0, 0},
	    {0, 1, 1, 4, 16 * MiB, 0, 1, 0},
	};
	const struct cfg *cs = quick ? small : full;
	size_t nc = quick ? sizeof small / sizeof small[0] : sizeof full / sizeof full[0];
	for (size_t i = 0; i < nc; i++) {
		if (cs[i].import && !imported)
			continue;
		fail |= run_cfg(&d, cs[i], total, reps, &up, &down, &a, &b, &dev);
	}
	if (imported)
		fail |= run_gather(&d, total, reps, &up, &down, &a, &b, &dev);
	vk_free_buffer(&d, &up);
	vk_free_buffer(&d, &down);
	vk_free_buffer(&d, &dev);
	/* The read-only mapping clientmem makes for a PUT, then whether an
	 * import and a device allocation still work after it (a refused
	 * import must cost one batch its zero-copy path, not the device). */
	import_line(&d, "memfd-ro", a.ro, total, NULL);
	import_line(&d, "memfd-ro-again", a.ro, total, NULL); /* the first GPU run refused twice, then failed a 1 GiB import */
	import_line(&d, "memfd-rw-after-refusal", a.rw, 16 * MiB, NULL);
	import_line(&d, "memfd-rw-whole-after-refusal", a.rw, total, NULL);
	printf("device_buffer_after_refusal bytes=%zu %s\n", total, vk_device_buffer(&d, total, &dev) ? "failed" : "ok");
	vk_free_buffer(&d, &dev);
	vk_close(&d);
	return fail ? 1 : 0;
}
