#ifndef VKPROBE_GATHER_H
#define VKPROBE_GATHER_H
#include "xfer.h"

/* The gather shader's pipeline, its two descriptor sets (host -> device,
 * device -> host) and the page table (host-visible, one uint a page). */
struct gather {
	struct vkdev *d;
	VkShaderModule sm;
	VkDescriptorSetLayout dsl;
	VkPipelineLayout pl;
	VkPipeline pipe;
	VkDescriptorPool dp;
	VkDescriptorSet set[2];
	struct vkbuf tab;
	uint32_t npages;
};

int gather_init(struct gather *g, struct vkdev *d, struct vkbuf *up, struct vkbuf *down, struct vkbuf *dev, VkDeviceSize total);
void gather_table(struct gather *g, int shuffle);
int gather_pass(struct gather *g, struct xfer *x, int upload, VkDeviceSize total, int poll);
void gather_free(struct gather *g);
#endif
