/* vkprobe: the Vulkan entry points the probe uses, loaded at run time.
 * libvulkan is dlopen'ed (never linked), so the binary starts on a machine
 * without it and says so; every function comes from vkGetInstanceProcAddr /
 * vkGetDeviceProcAddr, as issue 41's runtime would load them. */
#ifndef VKPROBE_VK_H
#define VKPROBE_VK_H
#define VK_NO_PROTOTYPES
#include <vulkan/vulkan.h>
#include <stddef.h>
#include <stdint.h>

#define VK_INSTANCE_FNS(X)                      \
	X(vkEnumeratePhysicalDevices)           \
	X(vkGetPhysicalDeviceProperties2)       \
	X(vkGetPhysicalDeviceQueueFamilyProperties) \
	X(vkGetPhysicalDeviceMemoryProperties)  \
	X(vkEnumerateDeviceExtensionProperties) \
	X(vkCreateDevice)                       \
	X(vkGetDeviceProcAddr)                  \
	X(vkDestroyInstance)

#define VK_DEVICE_FNS(X)                        \
	X(vkGetDeviceQueue)                     \
	X(vkCreateBuffer)                       \
	X(vkDestroyBuffer)                      \
	X(vkGetBufferMemoryRequirements)        \
	X(vkAllocateMemory)                     \
	X(vkFreeMemory)                         \
	X(vkBindBufferMemory)                   \
	X(vkMapMemory)                          \
	X(vkCreateCommandPool)                  \
	X(vkDestroyCommandPool)                 \
	X(vkAllocateCommandBuffers)             \
	X(vkBeginCommandBuffer)                 \
	X(vkEndCommandBuffer)                   \
	X(vkResetCommandBuffer)                 \
	X(vkCmdCopyBuffer)                      \
	X(vkCmdPipelineBarrier)                 \
	X(vkQueueSubmit)                        \
	X(vkCreateSemaphore)                    \
	X(vkDestroySemaphore)                   \
	X(vkWaitSemaphores)                     \
	X(vkGetSemaphoreCounterValue)           \
	X(vkDeviceWaitIdle)                     \
	X(vkDestroyDevice)                      \
	X(vkCreateShaderModule)                 \
	X(vkDestroyShaderModule)                \
	X(vkCreateDescriptorSetLayout)          \
	X(vkDestroyDescriptorSetLayout)         \
	X(vkCreatePipelineLayout)               \
	X(vkDestroyPipelineLayout)              \
	X(vkCreateComputePipelines)             \
	X(vkDestroyPipeline)                    \
	X(vkCreateDescriptorPool)               \
	X(vkDestroyDescriptorPool)              \
	X(vkAllocateDescriptorSets)             \
	X(vkUpdateDescriptorSets)               \
	X(vkCmdBindPipeline)                    \
	X(vkCmdBindDescriptorSets)              \
	X(vkCmdPushConstants)                   \
	X(vkCmdDispatch)

/* Extension functions: NULL where the device lacks the extension. */
#define VK_EXT_FNS(X)                           \
	X(vkGetMemoryHostPointerPropertiesEXT)  \
	X(vkGetMemoryFdPropertiesKHR)

#define DECL(f) extern PFN_##f f;
VK_INSTANCE_FNS(DECL)
VK_DEVICE_FNS(DECL)
VK_EXT_FNS(DECL)
#undef DECL

#define MAXQ 8

/* One opened device with the queues the probe may use. */
struct vkdev {
	VkInstance inst;
	VkPhysicalDevice pd;
	VkDevice dev;
	VkPhysicalDeviceMemoryProperties mem;
	int has_host_import, has_dmabuf;
	VkDeviceSize min_align;
	uint32_t compute_family, transfer_family; /* transfer_family == compute_family when no transfer-only family */
	uint32_t ncompute, ntransfer;
	VkQueue cq[MAXQ], tq[MAXQ];
	char name[VK_MAX_PHYSICAL_DEVICE_NAME_SIZE];
	char driver[VK_MAX_DRIVER_NAME_SIZE + VK_MAX_DRIVER_INFO_SIZE + 4];
	uint32_t api, driver_version, vendor;
	int cpu; /* VK_PHYSICAL_DEVICE_TYPE_CPU: lavapipe */
};

/* A buffer with its memory; host is the mapped (or imported) host address. */
struct vkbuf {
	VkBuffer buf;
	VkDeviceMemory mem;
	VkDeviceSize size;
	void *host;
};

int vk_load(const char **why);
int vk_open(struct vkdev *d, int index, const char **why);
void vk_close(struct vkdev *d);
int vk_device_buffer(struct vkdev *d, VkDeviceSize size, struct vkbuf *b);
int vk_staging_buffer(struct vkdev *d, VkDeviceSize size, struct vkbuf *b);
VkResult vk_import_host(struct vkdev *d, void *p, VkDeviceSize size, struct vkbuf *b, uint32_t *typebits);
VkResult vk_import_dmabuf(struct vkdev *d, int fd, VkDeviceSize size, struct vkbuf *b, uint32_t *typebits);
void vk_free_buffer(struct vkdev *d, struct vkbuf *b);
const char *vk_result(VkResult r);
#endif
