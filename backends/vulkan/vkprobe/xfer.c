/* vkprobe: batches of copies between host memory and a device buffer,
 * several in flight, each slot with its own timeline semaphore (batches on
 * several queues complete out of order, which one shared timeline forbids).
 * Two paths: the host memory imported and copied by the GPU (no CPU copy),
 * or the staging baseline (memcpy into the driver's mapped host-visible
 * memory, then the GPU copy), which is what a webgpu.h implementation does. */
#include "xfer.h"
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int xfer_init(struct xfer *x, struct vkdev *d, int transfer_family, int nq, int depth, VkDeviceSize batch, VkDeviceSize region)
{
	memset(x, 0, sizeof *x);
	x->d = d;
	x->family = transfer_family ? d->transfer_family : d->compute_family;
	uint32_t have = transfer_family ? d->ntransfer : d->ncompute;
	x->nq = (uint32_t)nq < have ? (uint32_t)nq : have;
	for (uint32_t i = 0; i < x->nq; i++)
		x->q[i] = transfer_family ? d->tq[i] : d->cq[i];
	x->depth = depth > MAXD ? MAXD : depth;
	x->stage = VK_PIPELINE_STAGE_TRANSFER_BIT;
	x->batch = batch;
	x->region = region && region < batch ? region : batch;
	x->nregions = (uint32_t)(batch / x->region);
	x->regions = calloc(x->nregions, sizeof *x->regions);
	VkCommandPoolCreateInfo pci = {.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
				       .flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT, .queueFamilyIndex = x->family};
	if (!x->regions || vkCreateCommandPool(d->dev, &pci, NULL, &x->pool))
		return -1;
	VkCommandBufferAllocateInfo cai = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO, .commandPool = x->pool,
					   .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY, .commandBufferCount = (uint32_t)x->depth};
	if (vkAllocateCommandBuffers(d->dev, &cai, x->cb))
		return -1;
	for (int s = 0; s < x->depth; s++) {
		VkSemaphoreTypeCreateInfo t = {.sType = VK_STRUCTURE_TYPE_SEMAPHORE_TYPE_CREATE_INFO, .semaphoreType = VK_SEMAPHORE_TYPE_TIMELINE};
		VkSemaphoreCreateInfo sci = {.sType = VK_STRUCTURE_TYPE_SEMAPHORE_CREATE_INFO, .pNext = &t};
		if (vkCreateSemaphore(d->dev, &sci, NULL, &x->sem[s]))
			return -1;
	}
	return 0;
}

void xfer_free(struct xfer *x)
{
	if (!x->d)
		return;
	vkDeviceWaitIdle(x->d->dev);
	for (int s = 0; s < x->depth; s++)
		if (x->sem[s])
			vkDestroySemaphore(x->d->dev, x->sem[s], NULL);
	if (x->pool)
		vkDestroyCommandPool(x->d->dev, x->pool, NULL);
	free(x->regions);
	memset(x, 0, sizeof *x);
}

/* wait_slot waits until slot s's last submission has finished. Polling
 * (counter read, then a 20 us sleep) is measured beside the driver's
 * blocking wait because a driver may spin inside vkWaitSemaphores. */
int xfer_wait(struct xfer *x, int s, int poll)
{
	if (x->val[s] == 0)
		return 0;
	if (poll) {
		for (;;) {
			uint64_t v = 0;
			if (vkGetSemaphoreCounterValue(x->d->dev, x->sem[s], &v))
				return -1;
			if (v >= x->val[s])
				return 0;
			struct timespec ts = {0, 20000};
			nanosleep(&ts, NULL);
		}
	}
	VkSemaphoreWaitInfo wi = {.sType = VK_STRUCTURE_TYPE_SEMAPHORE_WAIT_INFO, .semaphoreCount = 1,
				  .pSemaphores = &x->sem[s], .pValues = &x->val[s]};
	return vkWaitSemaphores(x->d->dev, &wi, UINT64_MAX) ? -1 : 0;
}

/* xfer_begin resets and opens slot s's command buffer for recording. */
VkCommandBuffer xfer_begin(struct xfer *x, int s)
{
	VkCommandBuffer cb = x->cb[s];
	VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO, .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT};
	if (vkResetCommandBuffer(cb, 0) || vkBeginCommandBuffer(cb, &bi))
		return VK_NULL_HANDLE;
	return cb;
}

/* xfer_submit closes slot s's commands with a barrier that makes their
 * writes visible to the host (the semaphore alone makes them available
 * to the device only; a download is read by the host next), and submits
 * them to queue qi (round robin), signalling the slot's next value. */
int xfer_submit(struct xfer *x, int s, uint32_t qi)
{
	VkCommandBuffer cb = x->cb[s];
	VkMemoryBarrier mb = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER, .srcAccessMask = x->stage == VK_PIPELINE_STAGE_TRANSFER_BIT ? VK_ACCESS_TRANSFER_WRITE_BIT : VK_ACCESS_SHADER_WRITE_BIT, .dstAccessMask = VK_ACCESS_HOST_READ_BIT};
	vkCmdPipelineBarrier(cb, x->stage, VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &mb, 0, NULL, 0, NULL);
	if (vkEndCommandBuffer(cb))
		return -1;
	uint64_t v = ++x->val[s];
	VkTimelineSemaphoreSubmitInfo ts = {.sType = VK_STRUCTURE_TYPE_TIMELINE_SEMAPHORE_SUBMIT_INFO, .signalSemaphoreValueCount = 1, .pSignalSemaphoreValues = &v};
	VkSubmitInfo si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .pNext = &ts, .commandBufferCount = 1, .pCommandBuffers = &cb,
			   .signalSemaphoreCount = 1, .pSignalSemaphores = &x->sem[s]};
	return vkQueueSubmit(x->q[qi % x->nq], 1, &si, VK_NULL_HANDLE) ? -1 : 0;
}

static int submit(struct xfer *x, int s, uint32_t qi, VkBuffer src, VkDeviceSize soff, VkBuffer dst, VkDeviceSize doff)
{
	VkCommandBuffer cb = xfer_begin(x, s);
	if (!cb)
		return -1;
	for (uint32_t i = 0; i < x->nregions; i++)
		x->regions[i] = (VkBufferCopy){.srcOffset = soff + i * x->region, .dstOffset = doff + i * x->region, .size = x->region};
	vkCmdCopyBuffer(cb, src, dst, x->nregions, x->regions);
	return xfer_submit(x, s, qi);
}

struct cpyarg {
	char *dst;
	const char *src;
	size_t n;
};

static void *cpy(void *a)
{
	struct cpyarg *c = a;
	memcpy(c->dst, c->src, c->n);
	return NULL;
}

/* pcopy copies n bytes on threads threads (the staging path's CPU copy). */
static void pcopy(void *dst, const void *src, size_t n, int threads)
{
	if (threads <= 1) {
		memcpy(dst, src, n);
		return;
	}
	pthread_t t[64];
	struct cpyarg a[64];
	if (threads > 64)
		threads = 64;
	size_t per = (n / threads + 4095) & ~(size_t)4095;
	int k = 0;
	for (size_t off = 0; off < n; off += per, k++) {
		a[k] = (struct cpyarg){(char *)dst + off, (const char *)src + off, off + per > n ? n - off : per};
		pthread_create(&t[k], NULL, cpy, &a[k]);
	}
	while (k-- > 0)
		pthread_join(t[k], NULL);
}

/* xfer_pass moves total bytes in batches, upload (host -> dev) or download.
 * Imported: host is a buffer whose memory is the imported host pages.
 * Staging (stage != NULL): hostp is plain memory, stage a mapped buffer
 * of depth*batch bytes, slot s at s*batch. */
int xfer_pass(struct xfer *x, int upload, VkDeviceSize total, struct vkbuf *host, void *hostp,
	      struct vkbuf *stage, struct vkbuf *dev, int threads, int poll)
{
	uint32_t nb = (uint32_t)(total / x->batch);
	int64_t pending[MAXD];
	for (int s = 0; s < x->depth; s++)
		pending[s] = -1;
	for (uint32_t i = 0; i < nb + (uint32_t)x->depth; i++) {
		int s = (int)(i % (uint32_t)x->depth);
		if (xfer_wait(x, s, poll))
			return -1;
		/* A finished staged download leaves its slot's bytes to copy out. */
		if (stage && !upload && pending[s] >= 0)
			pcopy((char *)hostp + pending[s] * x->batch, (char *)stage->host + s * x->batch, x->batch, threads);
		pending[s] = -1;
		if (i >= nb)
			continue; /* draining */
		VkDeviceSize off = (VkDeviceSize)i * x->batch;
		int r;
		if (stage) {
			VkDeviceSize so = (VkDeviceSize)s * x->batch;
			if (upload) {
				pcopy((char *)stage->host + so, (char *)hostp + off, x->batch, threads);
				r = submit(x, s, i, stage->buf, so, dev->buf, off);
			} else {
				r = submit(x, s, i, dev->buf, off, stage->buf, so);
			}
		} else {
			r = upload ? submit(x, s, i, host->buf, off, dev->buf, off) : submit(x, s, i, dev->buf, off, host->buf, off);
		}
		if (r)
			return -1;
		pending[s] = i;
	}
	return 0;
}
