/* vkprobe: scattered pages moved by a compute shader that reads (or
 * writes) the imported host buffer itself, one workgroup a page, in the
 * order of a page table. A copy command per 4 KiB page is slow on NVIDIA's
 * copy engines; this is the other way a batch of scattered client pages
 * can reach the GPU without a CPU copy (the cuda engine's s4d_fetch does
 * the same through mapped host pointers). */
#include "gather.h"
#include "gather.spv.h"
#include <stdio.h>
#include <string.h>

#define PAGE 4096u

int gather_init(struct gather *g, struct vkdev *d, struct vkbuf *up, struct vkbuf *down, struct vkbuf *dev, VkDeviceSize total)
{
	memset(g, 0, sizeof *g);
	g->d = d;
	g->npages = (uint32_t)(total / PAGE);
	if (vk_staging_buffer(d, (VkDeviceSize)g->npages * 4, &g->tab))
		return -1;
	VkShaderModuleCreateInfo smi = {.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO, .codeSize = sizeof gather_spv, .pCode = gather_spv};
	if (vkCreateShaderModule(d->dev, &smi, NULL, &g->sm))
		return -1;
	VkDescriptorSetLayoutBinding b[3];
	for (uint32_t i = 0; i < 3; i++)
		b[i] = (VkDescriptorSetLayoutBinding){.binding = i, .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, .descriptorCount = 1, .stageFlags = VK_SHADER_STAGE_COMPUTE_BIT};
	VkDescriptorSetLayoutCreateInfo dli = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO, .bindingCount = 3, .pBindings = b};
	if (vkCreateDescriptorSetLayout(d->dev, &dli, NULL, &g->dsl))
		return -1;
	VkPushConstantRange pcr = {.stageFlags = VK_SHADER_STAGE_COMPUTE_BIT, .size = 8};
	VkPipelineLayoutCreateInfo pli = {.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO, .setLayoutCount = 1, .pSetLayouts = &g->dsl,
					  .pushConstantRangeCount = 1, .pPushConstantRanges = &pcr};
	if (vkCreatePipelineLayout(d->dev, &pli, NULL, &g->pl))
		return -1;
	VkComputePipelineCreateInfo cpi = {.sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO, .layout = g->pl,
					   .stage = {.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO, .stage = VK_SHADER_STAGE_COMPUTE_BIT, .module = g->sm, .pName = "main"}};
	if (vkCreateComputePipelines(d->dev, VK_NULL_HANDLE, 1, &cpi, NULL, &g->pipe))
		return -1;
	VkDescriptorPoolSize ps = {.type = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, .descriptorCount = 6};
	VkDescriptorPoolCreateInfo dpi = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO, .maxSets = 2, .poolSizeCount = 1, .pPoolSizes = &ps};
	if (vkCreateDescriptorPool(d->dev, &dpi, NULL, &g->dp))
		return -1;
	VkDescriptorSetLayout l2[2] = {g->dsl, g->dsl};
	VkDescriptorSetAllocateInfo dai = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO, .descriptorPool = g->dp, .descriptorSetCount = 2, .pSetLayouts = l2};
	if (vkAllocateDescriptorSets(d->dev, &dai, g->set))
		return -1;
	/* Set 0 gathers host (up) -> device; set 1 scatters device -> host (down). */
	VkDescriptorBufferInfo bi[2][3] = {
	    {{up->buf, 0, total}, {dev->buf, 0, total}, {g->tab.buf, 0, VK_WHOLE_SIZE}},
	    {{dev->buf, 0, total}, {down->buf, 0, total}, {g->tab.buf, 0, VK_WHOLE_SIZE}},
	};
	VkWriteDescriptorSet w[6];
	for (int s = 0; s < 2; s++)
		for (uint32_t i = 0; i < 3; i++)
			w[s * 3 + i] = (VkWriteDescriptorSet){.sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET, .dstSet = g->set[s], .dstBinding = i,
							      .descriptorCount = 1, .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, .pBufferInfo = &bi[s][i]};
	vkUpdateDescriptorSets(d->dev, 6, w, 0, NULL);
	return 0;
}

/* gather_table fills the page table: in order, or a fixed shuffle of all
 * pages (so a batch's pages come from anywhere in the mapping). */
void gather_table(struct gather *g, int shuffle)
{
	uint32_t *t = g->tab.host;
	for (uint32_t i = 0; i < g->npages; i++)
		t[i] = i;
	uint64_t r = 0x2545F4914F6CDD1Dull;
	for (uint32_t i = g->npages; shuffle && i > 1; i--) {
		r ^= r << 13, r ^= r >> 7, r ^= r << 17;
		uint32_t j = (uint32_t)(r % i), v = t[i - 1];
		t[i - 1] = t[j];
		t[j] = v;
	}
}

/* gather_pass moves total bytes in x's batches through the shader; x must
 * be a compute-family xfer whose stage is the compute shader's. */
int gather_pass(struct gather *g, struct xfer *x, int upload, VkDeviceSize total, int poll)
{
	uint32_t nb = (uint32_t)(total / x->batch), per = (uint32_t)(x->batch / PAGE);
	for (uint32_t i = 0; i < nb; i++) {
		int s = (int)(i % (uint32_t)x->depth);
		if (xfer_wait(x, s, poll))
			return -1;
		VkCommandBuffer cb = xfer_begin(x, s);
		if (!cb)
			return -1;
		uint32_t pc[2] = {i * per, upload ? 0u : 1u};
		vkCmdBindPipeline(cb, VK_PIPELINE_BIND_POINT_COMPUTE, g->pipe);
		vkCmdBindDescriptorSets(cb, VK_PIPELINE_BIND_POINT_COMPUTE, g->pl, 0, 1, &g->set[upload ? 0 : 1], 0, NULL);
		vkCmdPushConstants(cb, g->pl, VK_SHADER_STAGE_COMPUTE_BIT, 0, sizeof pc, pc);
		vkCmdDispatch(cb, per, 1, 1);
		if (xfer_submit(x, s, i))
			return -1;
	}
	for (int s = 0; s < x->depth; s++)
		if (xfer_wait(x, s, poll))
			return -1;
	return 0;
}

void gather_free(struct gather *g)
{
	struct vkdev *d = g->d;
	if (!d)
		return;
	vkDeviceWaitIdle(d->dev);
	if (g->dp)
		vkDestroyDescriptorPool(d->dev, g->dp, NULL);
	if (g->pipe)
		vkDestroyPipeline(d->dev, g->pipe, NULL);
	if (g->pl)
		vkDestroyPipelineLayout(d->dev, g->pl, NULL);
	if (g->dsl)
		vkDestroyDescriptorSetLayout(d->dev, g->dsl, NULL);
	if (g->sm)
		vkDestroyShaderModule(d->dev, g->sm, NULL);
	vk_free_buffer(d, &g->tab);
	memset(g, 0, sizeof *g);
}
