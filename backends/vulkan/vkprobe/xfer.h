#ifndef VKPROBE_XFER_H
#define VKPROBE_XFER_H
#include "vk.h"

#define MAXD 16

/* Batched copies on nq queues of one family, depth batches in flight. */
struct xfer {
	struct vkdev *d;
	uint32_t family, nq;
	VkQueue q[MAXQ];
	int depth;
	VkDeviceSize batch, region;
	uint32_t nregions;
	VkBufferCopy *regions;
	VkCommandPool pool;
	VkCommandBuffer cb[MAXD];
	VkSemaphore sem[MAXD];
	uint64_t val[MAXD];
	VkPipelineStageFlags stage; /* what the slot's commands write from: transfer, or compute for the gather */
};

int xfer_init(struct xfer *x, struct vkdev *d, int transfer_family, int nq, int depth, VkDeviceSize batch, VkDeviceSize region);
void xfer_free(struct xfer *x);
int xfer_wait(struct xfer *x, int s, int poll);
VkCommandBuffer xfer_begin(struct xfer *x, int s);
int xfer_submit(struct xfer *x, int s, uint32_t qi);
int xfer_pass(struct xfer *x, int upload, VkDeviceSize total, struct vkbuf *host, void *hostp,
	      struct vkbuf *stage, struct vkbuf *dev, int threads, int poll);
#endif
