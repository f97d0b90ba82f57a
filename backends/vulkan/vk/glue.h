// C side of the Vulkan binding: a per-device procedure table loaded
// through the loader's proc-address calls, and the few multi-call steps
// (open a device, import host memory, submit a copy) done here so that
// their descriptor chains live on the C stack, never in Go memory.
#ifndef S4D_VK_GLUE_H
#define S4D_VK_GLUE_H
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "vkmin.h"

#define S4DVK_INSTANCE_FNS(X)                \
	X(vkDestroyInstance)                 \
	X(vkEnumeratePhysicalDevices)        \
	X(vkGetPhysicalDeviceProperties2)    \
	X(vkGetPhysicalDeviceQueueFamilyProperties) \
	X(vkGetPhysicalDeviceMemoryProperties) \
	X(vkEnumerateDeviceExtensionProperties) \
	X(vkCreateDevice)                    \
	X(vkGetDeviceProcAddr)

#define S4DVK_DEVICE_FNS(X)                  \
	X(vkDestroyDevice)                   \
	X(vkDeviceWaitIdle)                  \
	X(vkGetDeviceQueue)                  \
	X(vkCreateBuffer)                    \
	X(vkDestroyBuffer)                   \
	X(vkGetBufferMemoryRequirements)     \
	X(vkAllocateMemory)                  \
	X(vkFreeMemory)                      \
	X(vkBindBufferMemory)                \
	X(vkCreateCommandPool)               \
	X(vkDestroyCommandPool)              \
	X(vkAllocateCommandBuffers)          \
	X(vkBeginCommandBuffer)              \
	X(vkEndCommandBuffer)                \
	X(vkResetCommandBuffer)              \
	X(vkCmdCopyBuffer)                   \
	X(vkCmdPipelineBarrier)              \
	X(vkQueueSubmit)                     \
	X(vkCreateSemaphore)                 \
	X(vkDestroySemaphore)                \
	X(vkWaitSemaphores)                  \
	X(vkGetSemaphoreCounterValue)        \
	X(vkCreateShaderModule)              \
	X(vkDestroyShaderModule)             \
	X(vkCreateDescriptorSetLayout)       \
	X(vkDestroyDescriptorSetLayout)      \
	X(vkCreatePipelineLayout)            \
	X(vkDestroyPipelineLayout)           \
	X(vkCreateComputePipelines)          \
	X(vkDestroyPipeline)                 \
	X(vkCreateDescriptorPool)            \
	X(vkDestroyDescriptorPool)           \
	X(vkAllocateDescriptorSets)          \
	X(vkUpdateDescriptorSets)            \
	X(vkCmdBindPipeline)                 \
	X(vkCmdBindDescriptorSets)           \
	X(vkCmdDispatch)

// Command buffers of a queue: each is held by one caller from its
// recording to its submission (package vk hands them out), and reused once
// the queue's timeline shows its last submission done. Each has a pool of
// its own, so that callers record at once, unlocked: a pool may be used
// from one thread at a time.
#define S4DVK_RING 64

// One queue with its command buffers and timeline. Submissions to one
// queue signal its timeline in submission order, so a value done means
// every earlier one is done too.
typedef struct s4dvk_ring {
	uint32_t family;
	VkQueue queue;
	VkCommandPool pool[S4DVK_RING];
	VkCommandBuffer cb[S4DVK_RING];
	VkSemaphore timeline;
} s4dvk_ring;

// The rings: copies go to a transfer queue (of a transfer-only family
// where there is one), kernels to a compute queue.
#define S4DVK_COPY 0
#define S4DVK_KERNEL 1

typedef struct s4dvk_dev {
#define S4DVK_FIELD(f) PFN_##f f;
	S4DVK_INSTANCE_FNS(S4DVK_FIELD)
	S4DVK_DEVICE_FNS(S4DVK_FIELD)
#undef S4DVK_FIELD
	PFN_vkGetMemoryHostPointerPropertiesEXT vkGetMemoryHostPointerPropertiesEXT;
	VkInstance inst;
	VkPhysicalDevice pd;
	VkDevice dev;
	VkPhysicalDeviceMemoryProperties mem;
	int hostImport;
	uint64_t minAlign;
	int transferOnly;     // copies go to a transfer-only family
	int oneQueue;         // both rings submit to the same VkQueue (lavapipe)
	s4dvk_ring ring[2];
	char name[VK_MAX_PHYSICAL_DEVICE_NAME_SIZE];
	char driver[VK_MAX_DRIVER_NAME_SIZE + VK_MAX_DRIVER_INFO_SIZE + 2];
	uint32_t api, vendor;
	int cpu;
	int discrete;         // a discrete GPU: its own memory, across a bus from the host's
	int robust;           // robustBufferAccess and robustBufferAccess2 enabled (Options.Robust)
} s4dvk_dev;

static int s4dvk_hasext(VkExtensionProperties *e, uint32_t n, const char *name)
{
	for (uint32_t i = 0; i < n; i++)
		if (!strcmp(e[i].extensionName, name))
			return 1;
	return 0;
}

// s4dvk_open opens physical device index (-1: the first that is not a
// CPU, else the first) with timeline semaphores, host-memory import where
// offered, and one queue of a transfer-only family (else of a compute
// family) for copies. On failure why says what was missing; what was
// created is left for s4dvk_close.
static int s4dvk_open(PFN_vkGetInstanceProcAddr gipa, int index, int robust, s4dvk_dev *d, char *why, size_t whyn)
{
	PFN_vkEnumerateInstanceVersion ver = (PFN_vkEnumerateInstanceVersion)gipa(NULL, "vkEnumerateInstanceVersion");
	PFN_vkCreateInstance create = (PFN_vkCreateInstance)gipa(NULL, "vkCreateInstance");
	uint32_t iv = 0;
	if (!ver || !create || ver(&iv) || iv < VK_API_VERSION_1_2) {
		snprintf(why, whyn, "the Vulkan loader is older than 1.2");
		return -1;
	}
	VkApplicationInfo app = {.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO, .pApplicationName = "s4d", .apiVersion = VK_API_VERSION_1_2};
	VkInstanceCreateInfo ici = {.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO, .pApplicationInfo = &app};
	VkResult r = create(&ici, NULL, &d->inst);
	if (r) {
		snprintf(why, whyn, "vkCreateInstance: %d", r);
		return -1;
	}
#define S4DVK_LOADI(f) if (!(d->f = (PFN_##f)gipa(d->inst, #f))) { snprintf(why, whyn, "missing %s", #f); return -1; }
	S4DVK_INSTANCE_FNS(S4DVK_LOADI)
#undef S4DVK_LOADI
	VkPhysicalDevice pds[16];
	uint32_t n = 16;
	r = d->vkEnumeratePhysicalDevices(d->inst, &n, pds);
	if ((r && r != VK_INCOMPLETE) || n == 0) {
		snprintf(why, whyn, "no Vulkan device");
		return -1;
	}
	int pick = index;
	for (uint32_t i = 0; i < n && pick < 0; i++) {
		VkPhysicalDeviceProperties2 p = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2};
		d->vkGetPhysicalDeviceProperties2(pds[i], &p);
		if (p.properties.deviceType != VK_PHYSICAL_DEVICE_TYPE_CPU)
			pick = (int)i;
	}
	if (pick < 0)
		pick = 0;
	if ((uint32_t)pick >= n) {
		snprintf(why, whyn, "no Vulkan device %d (%u found)", pick, n);
		return -1;
	}
	d->pd = pds[pick];
	VkPhysicalDeviceExternalMemoryHostPropertiesEXT hp = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_EXTERNAL_MEMORY_HOST_PROPERTIES_EXT};
	VkPhysicalDeviceDriverProperties drv = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES, .pNext = &hp};
	VkPhysicalDeviceProperties2 p2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, .pNext = &drv};
	d->vkGetPhysicalDeviceProperties2(d->pd, &p2);
	snprintf(d->name, sizeof d->name, "%s", p2.properties.deviceName);
	snprintf(d->driver, sizeof d->driver, "%s %s", drv.driverName, drv.driverInfo);
	d->api = p2.properties.apiVersion;
	d->vendor = p2.properties.vendorID;
	d->cpu = p2.properties.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU;
	d->discrete = p2.properties.deviceType == VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU;
	if (d->api < VK_API_VERSION_1_2) {
		snprintf(why, whyn, "%s supports Vulkan %u.%u, not 1.2", d->name, d->api >> 22, (d->api >> 12) & 0x3ff);
		return -1;
	}
	d->vkGetPhysicalDeviceMemoryProperties(d->pd, &d->mem);

	uint32_t ne = 0;
	d->vkEnumerateDeviceExtensionProperties(d->pd, NULL, &ne, NULL);
	VkExtensionProperties *ext = calloc(ne ? ne : 1, sizeof *ext);
	if (!ext) {
		snprintf(why, whyn, "out of memory");
		return -1;
	}
	d->vkEnumerateDeviceExtensionProperties(d->pd, NULL, &ne, ext);
	d->hostImport = s4dvk_hasext(ext, ne, VK_EXT_EXTERNAL_MEMORY_HOST_EXTENSION_NAME);
	int hasRobust2 = s4dvk_hasext(ext, ne, "VK_EXT_robustness2");
	free(ext);
	// robust: 1 must, -1 where the device has robustBufferAccess and
	// robustBufferAccess2 (VkPhysicalDeviceFeatures2 with
	// VkPhysicalDeviceRobustness2FeaturesEXT chained), 0 never.
	if (robust != 0) {
		struct { VkStructureType sType; void *pNext; VkBool32 buf2, img2, nullDesc; } q = {(VkStructureType)1000286000, NULL, 0, 0, 0};
		struct { VkStructureType sType; void *pNext; VkBool32 f[55]; } f2 = {(VkStructureType)1000059000, &q, {0}};
		typedef void (*s4dvk_features2)(VkPhysicalDevice, void *);
		s4dvk_features2 get = (s4dvk_features2)gipa(d->inst, "vkGetPhysicalDeviceFeatures2");
		if (hasRobust2 && get)
			get(d->pd, &f2);
		int can = hasRobust2 && get && f2.f[0] && q.buf2;
		if (robust > 0 && !can) {
			snprintf(why, whyn, "%s has no robustBufferAccess2 (VK_EXT_robustness2)", d->name);
			return -1;
		}
		robust = can;
	}
	// The property is defined only where the extension is.
	d->minAlign = d->hostImport ? hp.minImportedHostPointerAlignment : 0;

	uint32_t nf = 0;
	d->vkGetPhysicalDeviceQueueFamilyProperties(d->pd, &nf, NULL);
	VkQueueFamilyProperties qf[64];
	nf = nf > 64 ? 64 : nf;
	d->vkGetPhysicalDeviceQueueFamilyProperties(d->pd, &nf, qf);
	uint32_t compute = UINT32_MAX, transfer = UINT32_MAX;
	for (uint32_t i = 0; i < nf; i++) {
		VkFlags f = qf[i].queueFlags;
		if ((f & VK_QUEUE_COMPUTE_BIT) && compute == UINT32_MAX)
			compute = i;
		if ((f & VK_QUEUE_TRANSFER_BIT) && !(f & (VK_QUEUE_COMPUTE_BIT | VK_QUEUE_GRAPHICS_BIT)) && transfer == UINT32_MAX)
			transfer = i;
	}
	if (compute == UINT32_MAX) {
		snprintf(why, whyn, "%s has no compute queue", d->name);
		return -1;
	}
	d->transferOnly = transfer != UINT32_MAX;
	d->ring[S4DVK_KERNEL].family = compute;
	d->ring[S4DVK_COPY].family = d->transferOnly ? transfer : compute;
	// One queue of each family; on one family, two queues where it has them.
	float prio[2] = {1, 1};
	uint32_t shared = !d->transferOnly && qf[compute].queueCount > 1 ? 2 : 1;
	VkDeviceQueueCreateInfo qci[2] = {
	    {.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO, .queueFamilyIndex = compute, .queueCount = d->transferOnly ? 1 : shared, .pQueuePriorities = prio},
	    {.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO, .queueFamilyIndex = transfer, .queueCount = 1, .pQueuePriorities = prio},
	};
	const char *want[2];
	uint32_t nwant = 0;
	if (d->hostImport)
		want[nwant++] = VK_EXT_EXTERNAL_MEMORY_HOST_EXTENSION_NAME;
	VkPhysicalDeviceTimelineSemaphoreFeatures tl = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_TIMELINE_SEMAPHORE_FEATURES, .timelineSemaphore = 1};
	// Robust buffer access (Options.Robust): the driver bounds every
	// buffer access, as Dawn's Vulkan backend has it do where Tint leaves
	// runtime-sized arrays unclamped.
	// VkPhysicalDeviceRobustness2FeaturesEXT, and VkPhysicalDeviceFeatures
	// as its 55 VkBool32s, robustBufferAccess first.
	struct { VkStructureType sType; void *pNext; VkBool32 buf2, img2, nullDesc; } rb2 = {(VkStructureType)1000286000, NULL, 1, 0, 0};
	VkBool32 feats[55] = {0};
	if (robust) {
		tl.pNext = &rb2;
		feats[0] = 1;
		want[nwant++] = "VK_EXT_robustness2";
	}
	VkDeviceCreateInfo dci = {.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO, .pNext = &tl, .queueCreateInfoCount = d->transferOnly ? 2 : 1, .pQueueCreateInfos = qci,
				  .enabledExtensionCount = nwant, .ppEnabledExtensionNames = want, .pEnabledFeatures = robust ? feats : NULL};
	d->robust = robust;
	if ((r = d->vkCreateDevice(d->pd, &dci, NULL, &d->dev))) {
		snprintf(why, whyn, "vkCreateDevice on %s: %d", d->name, r);
		return -1;
	}
#define S4DVK_LOADD(f) if (!(d->f = (PFN_##f)d->vkGetDeviceProcAddr(d->dev, #f))) { snprintf(why, whyn, "missing %s", #f); return -1; }
	S4DVK_DEVICE_FNS(S4DVK_LOADD)
#undef S4DVK_LOADD
	if (d->hostImport)
		d->vkGetMemoryHostPointerPropertiesEXT = (PFN_vkGetMemoryHostPointerPropertiesEXT)d->vkGetDeviceProcAddr(d->dev, "vkGetMemoryHostPointerPropertiesEXT");
	d->hostImport = d->hostImport && d->vkGetMemoryHostPointerPropertiesEXT;
	d->vkGetDeviceQueue(d->dev, compute, 0, &d->ring[S4DVK_KERNEL].queue);
	d->vkGetDeviceQueue(d->dev, d->ring[S4DVK_COPY].family, d->transferOnly ? 0 : shared - 1, &d->ring[S4DVK_COPY].queue);
	d->oneQueue = d->ring[S4DVK_COPY].queue == d->ring[S4DVK_KERNEL].queue;
	for (int i = 0; i < 2; i++) {
		s4dvk_ring *g = &d->ring[i];
		VkCommandPoolCreateInfo pci = {.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO, .flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT, .queueFamilyIndex = g->family};
		VkCommandBufferAllocateInfo cai = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO, .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY, .commandBufferCount = 1};
		VkSemaphoreTypeCreateInfo st = {.sType = VK_STRUCTURE_TYPE_SEMAPHORE_TYPE_CREATE_INFO, .semaphoreType = VK_SEMAPHORE_TYPE_TIMELINE};
		VkSemaphoreCreateInfo sci = {.sType = VK_STRUCTURE_TYPE_SEMAPHORE_CREATE_INFO, .pNext = &st};
		for (int j = 0; j < S4DVK_RING && !r; j++)
			if (!(r = d->vkCreateCommandPool(d->dev, &pci, NULL, &g->pool[j])))
				cai.commandPool = g->pool[j], r = d->vkAllocateCommandBuffers(d->dev, &cai, &g->cb[j]);
		if (r || (r = d->vkCreateSemaphore(d->dev, &sci, NULL, &g->timeline))) {
			snprintf(why, whyn, "command buffers and semaphore on %s: %d", d->name, r);
			return -1;
		}
	}
	return 0;
}

static void s4dvk_close(s4dvk_dev *d)
{
	if (d->dev) {
		d->vkDeviceWaitIdle(d->dev);
		for (int i = 0; i < 2; i++) {
			if (d->ring[i].timeline)
				d->vkDestroySemaphore(d->dev, d->ring[i].timeline, NULL);
			for (int j = 0; j < S4DVK_RING; j++)
				if (d->ring[i].pool[j])
					d->vkDestroyCommandPool(d->dev, d->ring[i].pool[j], NULL);
		}
		d->vkDestroyDevice(d->dev, NULL);
	}
	if (d->inst && d->vkDestroyInstance)
		d->vkDestroyInstance(d->inst, NULL);
	memset(d, 0, sizeof *d);
}

// s4dvk_type returns the first memory type in bits with every flag of want.
static int s4dvk_type(s4dvk_dev *d, uint32_t bits, VkFlags want)
{
	for (uint32_t i = 0; i < d->mem.memoryTypeCount; i++)
		if ((bits & (1u << i)) && (d->mem.memoryTypes[i].propertyFlags & want) == want)
			return (int)i;
	return -1;
}

// s4dvk_buffer makes a buffer of size bytes bound to new memory: imported
// from host (when host is set) or device-local. Nothing is left behind
// on failure.
static VkResult s4dvk_buffer(s4dvk_dev *d, void *host, uint64_t size, VkBuffer *buf, VkDeviceMemory *mem)
{
	*buf = 0;
	*mem = 0;
	const uint32_t ht = VK_EXTERNAL_MEMORY_HANDLE_TYPE_HOST_ALLOCATION_BIT_EXT;
	VkMemoryHostPointerPropertiesEXT hpp = {.sType = VK_STRUCTURE_TYPE_MEMORY_HOST_POINTER_PROPERTIES_EXT};
	VkResult r;
	if (host) {
		if (!d->hostImport)
			return VK_ERROR_EXTENSION_NOT_PRESENT;
		if ((r = d->vkGetMemoryHostPointerPropertiesEXT(d->dev, ht, host, &hpp)))
			return r;
	}
	VkExternalMemoryBufferCreateInfo ext = {.sType = VK_STRUCTURE_TYPE_EXTERNAL_MEMORY_BUFFER_CREATE_INFO, .handleTypes = ht};
	VkBufferCreateInfo bci = {.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO, .pNext = host ? &ext : NULL, .size = size,
				  .usage = VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT | VK_BUFFER_USAGE_STORAGE_BUFFER_BIT |
					   VK_BUFFER_USAGE_UNIFORM_BUFFER_BIT,
				  .sharingMode = VK_SHARING_MODE_EXCLUSIVE};
	if ((r = d->vkCreateBuffer(d->dev, &bci, NULL, buf)))
		return r;
	VkMemoryRequirements req;
	d->vkGetBufferMemoryRequirements(d->dev, *buf, &req);
	int t = host ? s4dvk_type(d, req.memoryTypeBits & hpp.memoryTypeBits, 0) : s4dvk_type(d, req.memoryTypeBits, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT);
	VkImportMemoryHostPointerInfoEXT imp = {.sType = VK_STRUCTURE_TYPE_IMPORT_MEMORY_HOST_POINTER_INFO_EXT, .handleType = ht, .pHostPointer = host};
	VkMemoryAllocateInfo mai = {.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO, .pNext = host ? &imp : NULL,
				    .allocationSize = host ? size : req.size, .memoryTypeIndex = (uint32_t)t};
	if (t < 0)
		r = VK_ERROR_FEATURE_NOT_PRESENT;
	else if (!(r = d->vkAllocateMemory(d->dev, &mai, NULL, mem)))
		r = d->vkBindBufferMemory(d->dev, *buf, *mem, 0);
	if (r) {
		d->vkDestroyBuffer(d->dev, *buf, NULL);
		if (*mem)
			d->vkFreeMemory(d->dev, *mem, NULL);
		*buf = 0;
		*mem = 0;
	}
	return r;
}

static void s4dvk_free(s4dvk_dev *d, VkBuffer buf, VkDeviceMemory mem)
{
	if (buf)
		d->vkDestroyBuffer(d->dev, buf, NULL);
	if (mem)
		d->vkFreeMemory(d->dev, mem, NULL);
}

// s4dvk_wait waits until ring r's timeline reaches value (timeout in ns).
static VkResult s4dvk_wait(s4dvk_dev *d, int r, uint64_t value, uint64_t timeout)
{
	VkSemaphoreWaitInfo wi = {.sType = VK_STRUCTURE_TYPE_SEMAPHORE_WAIT_INFO, .semaphoreCount = 1, .pSemaphores = &d->ring[r].timeline, .pValues = &value};
	return d->vkWaitSemaphores(d->dev, &wi, timeout);
}

static VkResult s4dvk_counter(s4dvk_dev *d, int r, uint64_t *v)
{
	return d->vkGetSemaphoreCounterValue(d->dev, d->ring[r].timeline, v);
}

// s4dvk_begin opens command buffer i of ring r, which the caller holds
// (its last submission done). When both rings share one queue, an
// `after` dependency is a barrier at its start (it orders everything
// submitted to the queue before) instead of a semaphore wait: a queue
// waiting on its own earlier signal is the one path where lavapipe was
// seen to hang.
static VkResult s4dvk_begin(s4dvk_dev *d, int r, int i, uint64_t afterValue, VkCommandBuffer *cb)
{
	*cb = d->ring[r].cb[i];
	VkResult e;
	VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO, .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT};
	if ((e = d->vkResetCommandBuffer(*cb, 0)) || (e = d->vkBeginCommandBuffer(*cb, &bi)))
		return e;
	if (d->oneQueue && afterValue) {
		VkMemoryBarrier mb = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER, .srcAccessMask = VK_ACCESS_MEMORY_WRITE_BIT,
				      .dstAccessMask = VK_ACCESS_MEMORY_READ_BIT | VK_ACCESS_MEMORY_WRITE_BIT};
		d->vkCmdPipelineBarrier(*cb, VK_PIPELINE_STAGE_ALL_COMMANDS_BIT, VK_PIPELINE_STAGE_ALL_COMMANDS_BIT, 0, 1, &mb, 0, NULL, 0, NULL);
	}
	return VK_SUCCESS;
}

// s4dvk_stage is the pipeline stage of ring r's work.
static VkFlags s4dvk_stage(int r) { return r == S4DVK_COPY ? VK_PIPELINE_STAGE_TRANSFER_BIT : VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT; }

// s4dvk_end closes the command buffer with a barrier that makes its
// writes visible to the host (the semaphore alone makes them available
// to the device only).
static VkResult s4dvk_end(s4dvk_dev *d, int r, VkCommandBuffer cb)
{
	VkMemoryBarrier mb = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
			      .srcAccessMask = r == S4DVK_COPY ? VK_ACCESS_TRANSFER_WRITE_BIT : VK_ACCESS_SHADER_WRITE_BIT,
			      .dstAccessMask = VK_ACCESS_HOST_READ_BIT};
	d->vkCmdPipelineBarrier(cb, s4dvk_stage(r), VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &mb, 0, NULL, 0, NULL);
	return d->vkEndCommandBuffer(cb);
}

// s4dvk_submit submits command buffers idx[0..n) of ring r in one call,
// buffer j after value after[j] of ring afterRing[j] where that is set,
// signalling the ring's values first, first+1, ... in that order. The
// caller holds the queue.
static VkResult s4dvk_submit(s4dvk_dev *d, int r, uint32_t n, const int32_t *idx, const int32_t *afterRing, const uint64_t *after, uint64_t first)
{
	s4dvk_ring *g = &d->ring[r];
	VkSubmitInfo si[S4DVK_RING];
	VkTimelineSemaphoreSubmitInfo ts[S4DVK_RING];
	uint64_t sig[S4DVK_RING], wait[S4DVK_RING];
	VkFlags stage = s4dvk_stage(r);
	if (n > S4DVK_RING)
		return VK_ERROR_INITIALIZATION_FAILED;
	for (uint32_t j = 0; j < n; j++) {
		sig[j] = first + j;
		wait[j] = d->oneQueue ? 0 : after[j]; // one queue: ordered by s4dvk_begin's barrier
		ts[j] = (VkTimelineSemaphoreSubmitInfo){.sType = VK_STRUCTURE_TYPE_TIMELINE_SEMAPHORE_SUBMIT_INFO, .waitSemaphoreValueCount = wait[j] ? 1 : 0,
							.pWaitSemaphoreValues = &wait[j], .signalSemaphoreValueCount = 1, .pSignalSemaphoreValues = &sig[j]};
		si[j] = (VkSubmitInfo){.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .pNext = &ts[j], .waitSemaphoreCount = wait[j] ? 1 : 0,
				       .pWaitSemaphores = &d->ring[afterRing[j] & 1].timeline, .pWaitDstStageMask = &stage,
				       .commandBufferCount = 1, .pCommandBuffers = &g->cb[idx[j]], .signalSemaphoreCount = 1, .pSignalSemaphores = &g->timeline};
	}
	return d->vkQueueSubmit(g->queue, n, si, 0);
}

// s4dvk_record_copy records a copy of the regions from src to dst into
// buffer i of the copy ring.
static VkResult s4dvk_record_copy(s4dvk_dev *d, int i, VkBuffer src, VkBuffer dst, const VkBufferCopy *regions, uint32_t n, uint64_t afterValue)
{
	VkCommandBuffer cb;
	VkResult e = s4dvk_begin(d, S4DVK_COPY, i, afterValue, &cb);
	if (e)
		return e;
	d->vkCmdCopyBuffer(cb, src, dst, n, regions);
	return s4dvk_end(d, S4DVK_COPY, cb);
}

// Descriptor sets per kernel: one per dispatch the engine keeps in flight
// on it (each rebound only while no dispatch of it is in flight); a GET
// round may dispatch the gather kernel several times, with one set each.
#define S4DVK_SETS 128

// A compute pipeline from a SPIR-V module whose bindings are all in set
// 0, numbered from 0, each a storage or uniform buffer; S4DVK_SETS
// descriptor sets of that layout.
typedef struct s4dvk_kernel {
	VkShaderModule sm;
	VkDescriptorSetLayout dsl;
	VkPipelineLayout pl;
	VkPipeline pipe;
	VkDescriptorPool pool;
	VkDescriptorSet set[S4DVK_SETS];
} s4dvk_kernel;

static void s4dvk_kernel_free(s4dvk_dev *d, s4dvk_kernel *k)
{
	if (k->pool)
		d->vkDestroyDescriptorPool(d->dev, k->pool, NULL);
	if (k->pipe)
		d->vkDestroyPipeline(d->dev, k->pipe, NULL);
	if (k->pl)
		d->vkDestroyPipelineLayout(d->dev, k->pl, NULL);
	if (k->dsl)
		d->vkDestroyDescriptorSetLayout(d->dev, k->dsl, NULL);
	if (k->sm)
		d->vkDestroyShaderModule(d->dev, k->sm, NULL);
	memset(k, 0, sizeof *k);
}

static VkResult s4dvk_kernel_new(s4dvk_dev *d, const void *code, size_t size, const char *entry, uint32_t nb, const int32_t *types, s4dvk_kernel *k)
{
	memset(k, 0, sizeof *k);
	VkDescriptorSetLayoutBinding b[16];
	VkDescriptorPoolSize ps[2] = {{VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 0}, {VK_DESCRIPTOR_TYPE_UNIFORM_BUFFER, 0}};
	if (nb > 16)
		return VK_ERROR_FEATURE_NOT_PRESENT;
	for (uint32_t i = 0; i < nb; i++) {
		b[i] = (VkDescriptorSetLayoutBinding){.binding = i, .descriptorType = types[i], .descriptorCount = 1, .stageFlags = VK_SHADER_STAGE_COMPUTE_BIT};
		ps[types[i] == VK_DESCRIPTOR_TYPE_UNIFORM_BUFFER].descriptorCount += S4DVK_SETS;
	}
	VkShaderModuleCreateInfo smi = {.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO, .codeSize = size, .pCode = code};
	VkDescriptorSetLayoutCreateInfo dli = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO, .bindingCount = nb, .pBindings = b};
	VkResult e;
	if ((e = d->vkCreateShaderModule(d->dev, &smi, NULL, &k->sm)) || (e = d->vkCreateDescriptorSetLayout(d->dev, &dli, NULL, &k->dsl)))
		goto fail;
	VkPipelineLayoutCreateInfo pli = {.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO, .setLayoutCount = 1, .pSetLayouts = &k->dsl};
	if ((e = d->vkCreatePipelineLayout(d->dev, &pli, NULL, &k->pl)))
		goto fail;
	VkComputePipelineCreateInfo cpi = {.sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO, .layout = k->pl,
					   .stage = {.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO, .stage = VK_SHADER_STAGE_COMPUTE_BIT, .module = k->sm, .pName = entry}};
	if ((e = d->vkCreateComputePipelines(d->dev, 0, 1, &cpi, NULL, &k->pipe)))
		goto fail;
	VkDescriptorPoolCreateInfo dpi = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO, .maxSets = S4DVK_SETS, .poolSizeCount = 2, .pPoolSizes = ps};
	if (!ps[0].descriptorCount || !ps[1].descriptorCount) {
		dpi.poolSizeCount = 1;
		dpi.pPoolSizes = ps[0].descriptorCount ? &ps[0] : &ps[1];
	}
	VkDescriptorSetLayout dsls[S4DVK_SETS];
	for (int i = 0; i < S4DVK_SETS; i++)
		dsls[i] = k->dsl;
	VkDescriptorSetAllocateInfo dai = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO, .descriptorSetCount = S4DVK_SETS, .pSetLayouts = dsls};
	if ((e = d->vkCreateDescriptorPool(d->dev, &dpi, NULL, &k->pool)) || (dai.descriptorPool = k->pool, e = d->vkAllocateDescriptorSets(d->dev, &dai, k->set)))
		goto fail;
	return VK_SUCCESS;
fail:
	s4dvk_kernel_free(d, k);
	return e;
}

static void s4dvk_kernel_bind(s4dvk_dev *d, s4dvk_kernel *k, int set, uint32_t binding, int32_t type, VkBuffer buf, uint64_t off, uint64_t range)
{
	VkDescriptorBufferInfo bi = {buf, off, range};
	VkWriteDescriptorSet w = {.sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET, .dstSet = k->set[set], .dstBinding = binding, .descriptorCount = 1,
				  .descriptorType = type, .pBufferInfo = &bi};
	d->vkUpdateDescriptorSets(d->dev, 1, &w, 0, NULL);
}

// s4dvk_record_dispatch records n dispatches of k into buffer i of the
// kernel ring, dispatch j with descriptor set sets[j] and xs[j]*y*z
// workgroups: they may run at once.
static VkResult s4dvk_record_dispatch(s4dvk_dev *d, int i, s4dvk_kernel *k, const int32_t *sets, const uint32_t *xs, uint32_t n, uint32_t y, uint32_t z, uint64_t afterValue)
{
	VkCommandBuffer cb;
	VkResult e = s4dvk_begin(d, S4DVK_KERNEL, i, afterValue, &cb);
	if (e)
		return e;
	d->vkCmdBindPipeline(cb, VK_PIPELINE_BIND_POINT_COMPUTE, k->pipe);
	for (uint32_t j = 0; j < n; j++) {
		d->vkCmdBindDescriptorSets(cb, VK_PIPELINE_BIND_POINT_COMPUTE, k->pl, 0, 1, &k->set[sets[j]], 0, NULL);
		d->vkCmdDispatch(cb, xs[j], y, z);
	}
	return s4dvk_end(d, S4DVK_KERNEL, cb);
}

// s4dvk_layout returns size k of the layout table TestLayout checks, -1 past its end.
#define S4DVK_SZ(T) (int64_t) sizeof(T)
#define S4DVK_OFF(T, f) (int64_t) offsetof(T, f)
static int64_t s4dvk_layout(int k)
{
	const int64_t v[] = {
	    S4DVK_SZ(VkApplicationInfo), S4DVK_OFF(VkApplicationInfo, apiVersion),
	    S4DVK_SZ(VkInstanceCreateInfo), S4DVK_OFF(VkInstanceCreateInfo, ppEnabledExtensionNames),
	    S4DVK_SZ(VkPhysicalDeviceProperties), S4DVK_OFF(VkPhysicalDeviceProperties, deviceName),
	    S4DVK_OFF(VkPhysicalDeviceProperties, limits), S4DVK_OFF(VkPhysicalDeviceProperties, sparseProperties),
	    S4DVK_SZ(VkPhysicalDeviceProperties2), S4DVK_OFF(VkPhysicalDeviceProperties2, properties),
	    S4DVK_SZ(VkPhysicalDeviceExternalMemoryHostPropertiesEXT), S4DVK_OFF(VkPhysicalDeviceExternalMemoryHostPropertiesEXT, minImportedHostPointerAlignment),
	    S4DVK_SZ(VkPhysicalDeviceDriverProperties), S4DVK_OFF(VkPhysicalDeviceDriverProperties, driverInfo),
	    S4DVK_SZ(VkQueueFamilyProperties), S4DVK_SZ(VkExtensionProperties),
	    S4DVK_SZ(VkPhysicalDeviceMemoryProperties), S4DVK_OFF(VkPhysicalDeviceMemoryProperties, memoryHeapCount),
	    S4DVK_OFF(VkPhysicalDeviceMemoryProperties, memoryHeaps),
	    S4DVK_SZ(VkDeviceQueueCreateInfo), S4DVK_OFF(VkDeviceQueueCreateInfo, pQueuePriorities),
	    S4DVK_SZ(VkDeviceCreateInfo), S4DVK_OFF(VkDeviceCreateInfo, ppEnabledExtensionNames), S4DVK_OFF(VkDeviceCreateInfo, pEnabledFeatures),
	    S4DVK_SZ(VkPhysicalDeviceTimelineSemaphoreFeatures),
	    S4DVK_SZ(VkBufferCreateInfo), S4DVK_OFF(VkBufferCreateInfo, size), S4DVK_OFF(VkBufferCreateInfo, usage), S4DVK_OFF(VkBufferCreateInfo, pQueueFamilyIndices),
	    S4DVK_SZ(VkExternalMemoryBufferCreateInfo),
	    S4DVK_SZ(VkMemoryRequirements),
	    S4DVK_SZ(VkMemoryAllocateInfo), S4DVK_OFF(VkMemoryAllocateInfo, memoryTypeIndex),
	    S4DVK_SZ(VkImportMemoryHostPointerInfoEXT), S4DVK_OFF(VkImportMemoryHostPointerInfoEXT, pHostPointer),
	    S4DVK_SZ(VkMemoryHostPointerPropertiesEXT),
	    S4DVK_SZ(VkCommandPoolCreateInfo), S4DVK_SZ(VkCommandBufferAllocateInfo), S4DVK_OFF(VkCommandBufferAllocateInfo, commandBufferCount),
	    S4DVK_SZ(VkCommandBufferBeginInfo), S4DVK_SZ(VkBufferCopy), S4DVK_SZ(VkMemoryBarrier),
	    S4DVK_SZ(VkSemaphoreTypeCreateInfo), S4DVK_OFF(VkSemaphoreTypeCreateInfo, initialValue), S4DVK_SZ(VkSemaphoreCreateInfo),
	    S4DVK_SZ(VkTimelineSemaphoreSubmitInfo), S4DVK_OFF(VkTimelineSemaphoreSubmitInfo, pSignalSemaphoreValues),
	    S4DVK_SZ(VkSubmitInfo), S4DVK_OFF(VkSubmitInfo, pCommandBuffers), S4DVK_OFF(VkSubmitInfo, pSignalSemaphores),
	    S4DVK_SZ(VkSemaphoreWaitInfo), S4DVK_OFF(VkSemaphoreWaitInfo, pValues),
	    S4DVK_SZ(VkShaderModuleCreateInfo), S4DVK_OFF(VkShaderModuleCreateInfo, pCode),
	    S4DVK_SZ(VkDescriptorSetLayoutBinding), S4DVK_SZ(VkDescriptorSetLayoutCreateInfo),
	    S4DVK_SZ(VkPipelineLayoutCreateInfo), S4DVK_OFF(VkPipelineLayoutCreateInfo, pPushConstantRanges),
	    S4DVK_SZ(VkPipelineShaderStageCreateInfo), S4DVK_OFF(VkPipelineShaderStageCreateInfo, pName),
	    S4DVK_SZ(VkComputePipelineCreateInfo), S4DVK_OFF(VkComputePipelineCreateInfo, stage), S4DVK_OFF(VkComputePipelineCreateInfo, layout),
	    S4DVK_OFF(VkComputePipelineCreateInfo, basePipelineIndex),
	    S4DVK_SZ(VkDescriptorPoolSize), S4DVK_SZ(VkDescriptorPoolCreateInfo), S4DVK_OFF(VkDescriptorPoolCreateInfo, pPoolSizes),
	    S4DVK_SZ(VkDescriptorSetAllocateInfo), S4DVK_SZ(VkDescriptorBufferInfo),
	    S4DVK_SZ(VkWriteDescriptorSet), S4DVK_OFF(VkWriteDescriptorSet, descriptorType), S4DVK_OFF(VkWriteDescriptorSet, pBufferInfo),
	};
	return k >= 0 && k < (int)(sizeof v / sizeof v[0]) ? v[k] : -1;
}
#endif
