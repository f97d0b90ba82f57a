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
	X(vkGetSemaphoreCounterValue)

// Copies in flight at most: one command buffer each, reused once the
// timeline semaphore shows its copy done.
#define S4DVK_RING 8

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
	uint32_t family;      // the queue family copies go to
	int transferOnly;     // family is a transfer-only one
	VkQueue queue;
	VkCommandPool pool;
	VkCommandBuffer cb[S4DVK_RING];
	uint64_t cbValue[S4DVK_RING]; // the timeline value of each buffer's last submission
	VkSemaphore timeline;
	uint64_t submitted;   // the last value signalled
	char name[VK_MAX_PHYSICAL_DEVICE_NAME_SIZE];
	char driver[VK_MAX_DRIVER_NAME_SIZE + VK_MAX_DRIVER_INFO_SIZE + 2];
	uint32_t api, vendor;
	int cpu;
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
static int s4dvk_open(PFN_vkGetInstanceProcAddr gipa, int index, s4dvk_dev *d, char *why, size_t whyn)
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
	free(ext);
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
	d->family = d->transferOnly ? transfer : compute;
	float prio = 1;
	VkDeviceQueueCreateInfo qci = {.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO, .queueFamilyIndex = d->family, .queueCount = 1, .pQueuePriorities = &prio};
	const char *want[1] = {VK_EXT_EXTERNAL_MEMORY_HOST_EXTENSION_NAME};
	VkPhysicalDeviceTimelineSemaphoreFeatures tl = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_TIMELINE_SEMAPHORE_FEATURES, .timelineSemaphore = 1};
	VkDeviceCreateInfo dci = {.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO, .pNext = &tl, .queueCreateInfoCount = 1, .pQueueCreateInfos = &qci,
				  .enabledExtensionCount = d->hostImport ? 1 : 0, .ppEnabledExtensionNames = want};
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
	d->vkGetDeviceQueue(d->dev, d->family, 0, &d->queue);

	VkCommandPoolCreateInfo pci = {.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO, .flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT, .queueFamilyIndex = d->family};
	VkCommandBufferAllocateInfo cai = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO, .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY, .commandBufferCount = S4DVK_RING};
	VkSemaphoreTypeCreateInfo st = {.sType = VK_STRUCTURE_TYPE_SEMAPHORE_TYPE_CREATE_INFO, .semaphoreType = VK_SEMAPHORE_TYPE_TIMELINE};
	VkSemaphoreCreateInfo sci = {.sType = VK_STRUCTURE_TYPE_SEMAPHORE_CREATE_INFO, .pNext = &st};
	if ((r = d->vkCreateCommandPool(d->dev, &pci, NULL, &d->pool)) ||
	    (cai.commandPool = d->pool, r = d->vkAllocateCommandBuffers(d->dev, &cai, d->cb)) ||
	    (r = d->vkCreateSemaphore(d->dev, &sci, NULL, &d->timeline))) {
		snprintf(why, whyn, "command buffers and semaphore on %s: %d", d->name, r);
		return -1;
	}
	return 0;
}

static void s4dvk_close(s4dvk_dev *d)
{
	if (d->dev) {
		d->vkDeviceWaitIdle(d->dev);
		if (d->timeline)
			d->vkDestroySemaphore(d->dev, d->timeline, NULL);
		if (d->pool)
			d->vkDestroyCommandPool(d->dev, d->pool, NULL);
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
				  .usage = VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT | VK_BUFFER_USAGE_STORAGE_BUFFER_BIT,
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

// s4dvk_wait waits until the timeline reaches value (timeout in ns).
static VkResult s4dvk_wait(s4dvk_dev *d, uint64_t value, uint64_t timeout)
{
	VkSemaphoreWaitInfo wi = {.sType = VK_STRUCTURE_TYPE_SEMAPHORE_WAIT_INFO, .semaphoreCount = 1, .pSemaphores = &d->timeline, .pValues = &value};
	return d->vkWaitSemaphores(d->dev, &wi, timeout);
}

// s4dvk_copy records the regions from src to dst, then a barrier that
// makes the writes visible to the host (a download is read there next;
// the semaphore alone makes them available to the device only), and
// submits them signalling the next timeline value, put in *ticket. The
// ring's next command buffer is reused once its last copy is done.
static VkResult s4dvk_copy(s4dvk_dev *d, VkBuffer src, VkBuffer dst, const VkBufferCopy *regions, uint32_t n, uint64_t *ticket)
{
	uint32_t slot = (uint32_t)(d->submitted % S4DVK_RING);
	VkResult r;
	if (d->cbValue[slot] && (r = s4dvk_wait(d, d->cbValue[slot], UINT64_MAX)))
		return r;
	VkCommandBuffer cb = d->cb[slot];
	VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO, .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT};
	if ((r = d->vkResetCommandBuffer(cb, 0)) || (r = d->vkBeginCommandBuffer(cb, &bi)))
		return r;
	d->vkCmdCopyBuffer(cb, src, dst, n, regions);
	VkMemoryBarrier mb = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER, .srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT, .dstAccessMask = VK_ACCESS_HOST_READ_BIT};
	d->vkCmdPipelineBarrier(cb, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &mb, 0, NULL, 0, NULL);
	if ((r = d->vkEndCommandBuffer(cb)))
		return r;
	uint64_t v = d->submitted + 1;
	VkTimelineSemaphoreSubmitInfo ts = {.sType = VK_STRUCTURE_TYPE_TIMELINE_SEMAPHORE_SUBMIT_INFO, .signalSemaphoreValueCount = 1, .pSignalSemaphoreValues = &v};
	VkSubmitInfo si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .pNext = &ts, .commandBufferCount = 1, .pCommandBuffers = &cb,
			   .signalSemaphoreCount = 1, .pSignalSemaphores = &d->timeline};
	if ((r = d->vkQueueSubmit(d->queue, 1, &si, 0)))
		return r;
	d->submitted = v;
	d->cbValue[slot] = v;
	*ticket = v;
	return VK_SUCCESS;
}

static VkResult s4dvk_counter(s4dvk_dev *d, uint64_t *v)
{
	return d->vkGetSemaphoreCounterValue(d->dev, d->timeline, v);
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
	};
	return k >= 0 && k < (int)(sizeof v / sizeof v[0]) ? v[k] : -1;
}
#endif
