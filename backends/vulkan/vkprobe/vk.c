/* vkprobe: libvulkan loaded at run time, one compute device opened with
 * its transfer queues, buffers made, and host memory imported with
 * VK_EXT_external_memory_host (or a dma-buf with VK_EXT_external_memory_dma_buf). */
#include "vk.h"
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define DEF(f) PFN_##f f;
VK_INSTANCE_FNS(DEF)
VK_DEVICE_FNS(DEF)
VK_EXT_FNS(DEF)
#undef DEF

static PFN_vkGetInstanceProcAddr gipa;
static PFN_vkCreateInstance createInstance;
static PFN_vkEnumerateInstanceVersion enumerateInstanceVersion;

const char *vk_result(VkResult r)
{
	switch (r) {
	case VK_SUCCESS: return "VK_SUCCESS";
	case VK_ERROR_OUT_OF_HOST_MEMORY: return "VK_ERROR_OUT_OF_HOST_MEMORY";
	case VK_ERROR_OUT_OF_DEVICE_MEMORY: return "VK_ERROR_OUT_OF_DEVICE_MEMORY";
	case VK_ERROR_INITIALIZATION_FAILED: return "VK_ERROR_INITIALIZATION_FAILED";
	case VK_ERROR_DEVICE_LOST: return "VK_ERROR_DEVICE_LOST";
	case VK_ERROR_EXTENSION_NOT_PRESENT: return "VK_ERROR_EXTENSION_NOT_PRESENT";
	case VK_ERROR_FEATURE_NOT_PRESENT: return "VK_ERROR_FEATURE_NOT_PRESENT";
	case VK_ERROR_INCOMPATIBLE_DRIVER: return "VK_ERROR_INCOMPATIBLE_DRIVER";
	case VK_ERROR_INVALID_EXTERNAL_HANDLE: return "VK_ERROR_INVALID_EXTERNAL_HANDLE";
	case VK_ERROR_TOO_MANY_OBJECTS: return "VK_ERROR_TOO_MANY_OBJECTS";
	case VK_ERROR_MEMORY_MAP_FAILED: return "VK_ERROR_MEMORY_MAP_FAILED";
	case VK_TIMEOUT: return "VK_TIMEOUT";
	default: return "VK_ERROR_(other)";
	}
}

/* vk_load opens the loader by its versioned soname first (the unversioned
 * name is a development symlink) and takes the global entry points. */
int vk_load(const char **why)
{
	static const char *names[] = {"libvulkan.so.1", "libvulkan.so"};
	void *h = NULL;
	for (size_t i = 0; i < sizeof names / sizeof names[0] && !h; i++)
		h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		*why = "libvulkan.so.1 not found";
		return -1;
	}
	gipa = (PFN_vkGetInstanceProcAddr)dlsym(h, "vkGetInstanceProcAddr");
	if (!gipa) {
		*why = "libvulkan has no vkGetInstanceProcAddr";
		return -1;
	}
	createInstance = (PFN_vkCreateInstance)gipa(NULL, "vkCreateInstance");
	enumerateInstanceVersion = (PFN_vkEnumerateInstanceVersion)gipa(NULL, "vkEnumerateInstanceVersion");
	if (!createInstance || !enumerateInstanceVersion) {
		*why = "loader older than Vulkan 1.1";
		return -1;
	}
	return 0;
}

static int has_ext(VkExtensionProperties *e, uint32_t n, const char *name)
{
	for (uint32_t i = 0; i < n; i++)
		if (!strcmp(e[i].extensionName, name))
			return 1;
	return 0;
}

/* vk_open opens physical device index (-1: the first that is not a CPU
 * device, else the first) with timeline semaphores, every queue of the
 * compute family and of a transfer-only family if there is one. */
int vk_open(struct vkdev *d, int index, const char **why)
{
	memset(d, 0, sizeof *d);
	uint32_t iv = 0;
	enumerateInstanceVersion(&iv);
	if (iv < VK_API_VERSION_1_2) {
		*why = "instance version below 1.2 (timeline semaphores)";
		return -1;
	}
	VkApplicationInfo app = {.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO, .pApplicationName = "s4d-vkprobe", .apiVersion = VK_API_VERSION_1_2};
	VkInstanceCreateInfo ici = {.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO, .pApplicationInfo = &app};
	VkResult r = createInstance(&ici, NULL, &d->inst);
	if (r) {
		*why = vk_result(r);
		return -1;
	}
#define LOADI(f) f = (PFN_##f)gipa(d->inst, #f); if (!f) { *why = "missing " #f; return -1; }
	VK_INSTANCE_FNS(LOADI)
#undef LOADI
	VkPhysicalDevice pds[16];
	uint32_t n = 16;
	r = vkEnumeratePhysicalDevices(d->inst, &n, pds);
	if ((r && r != VK_INCOMPLETE) || n == 0) {
		*why = "no Vulkan physical device";
		return -1;
	}
	int pick = index;
	for (uint32_t i = 0; i < n; i++) {
		VkPhysicalDeviceDriverProperties drv = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES};
		VkPhysicalDeviceProperties2 p2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, .pNext = &drv};
		vkGetPhysicalDeviceProperties2(pds[i], &p2);
		printf("physical_device[%u]=%s type=%d driver=%s %s\n", i, p2.properties.deviceName,
		       p2.properties.deviceType, drv.driverName, drv.driverInfo);
		if (pick < 0 && p2.properties.deviceType != VK_PHYSICAL_DEVICE_TYPE_CPU)
			pick = (int)i;
	}
	if (pick < 0)
		pick = 0;
	if ((uint32_t)pick >= n) {
		*why = "no physical device of that index";
		return -1;
	}
	d->pd = pds[pick];

	VkPhysicalDeviceExternalMemoryHostPropertiesEXT hp = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_EXTERNAL_MEMORY_HOST_PROPERTIES_EXT};
	VkPhysicalDeviceDriverProperties drv = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES, .pNext = &hp};
	VkPhysicalDeviceProperties2 p2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, .pNext = &drv};
	vkGetPhysicalDeviceProperties2(d->pd, &p2);
	snprintf(d->name, sizeof d->name, "%s", p2.properties.deviceName);
	snprintf(d->driver, sizeof d->driver, "%s %s", drv.driverName, drv.driverInfo);
	d->api = p2.properties.apiVersion;
	d->driver_version = p2.properties.driverVersion;
	d->vendor = p2.properties.vendorID;
	d->cpu = p2.properties.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU;
	vkGetPhysicalDeviceMemoryProperties(d->pd, &d->mem);

	uint32_t ne = 0;
	vkEnumerateDeviceExtensionProperties(d->pd, NULL, &ne, NULL);
	VkExtensionProperties ext[ne ? ne : 1];
	vkEnumerateDeviceExtensionProperties(d->pd, NULL, &ne, ext);
	d->has_host_import = has_ext(ext, ne, VK_EXT_EXTERNAL_MEMORY_HOST_EXTENSION_NAME);
	d->has_dmabuf = has_ext(ext, ne, VK_EXT_EXTERNAL_MEMORY_DMA_BUF_EXTENSION_NAME) &&
			has_ext(ext, ne, VK_KHR_EXTERNAL_MEMORY_FD_EXTENSION_NAME);
	/* The property is only defined where the extension is. */
	d->min_align = d->has_host_import ? hp.minImportedHostPointerAlignment : 0;

	uint32_t nf = 0;
	vkGetPhysicalDeviceQueueFamilyProperties(d->pd, &nf, NULL);
	VkQueueFamilyProperties qf[nf ? nf : 1];
	vkGetPhysicalDeviceQueueFamilyProperties(d->pd, &nf, qf);
	d->compute_family = d->transfer_family = UINT32_MAX;
	for (uint32_t i = 0; i < nf; i++) {
		VkQueueFlags f = qf[i].queueFlags;
		printf("queue_family[%u] flags=0x%x count=%u\n", i, f, qf[i].queueCount);
		if ((f & VK_QUEUE_COMPUTE_BIT) && d->compute_family == UINT32_MAX)
			d->compute_family = i;
		if ((f & VK_QUEUE_TRANSFER_BIT) && !(f & (VK_QUEUE_COMPUTE_BIT | VK_QUEUE_GRAPHICS_BIT)) &&
		    d->transfer_family == UINT32_MAX)
			d->transfer_family = i;
	}
	if (d->compute_family == UINT32_MAX) {
		*why = "no compute queue family";
		return -1;
	}
	int separate = d->transfer_family != UINT32_MAX;
	if (!separate)
		d->transfer_family = d->compute_family;
	d->ncompute = qf[d->compute_family].queueCount < MAXQ ? qf[d->compute_family].queueCount : MAXQ;
	d->ntransfer = separate ? (qf[d->transfer_family].queueCount < MAXQ ? qf[d->transfer_family].queueCount : MAXQ) : d->ncompute;

	float prio[MAXQ] = {1, 1, 1, 1, 1, 1, 1, 1};
	VkDeviceQueueCreateInfo qci[2] = {
	    {.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO, .queueFamilyIndex = d->compute_family, .queueCount = d->ncompute, .pQueuePriorities = prio},
	    {.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO, .queueFamilyIndex = d->transfer_family, .queueCount = d->ntransfer, .pQueuePriorities = prio},
	};
	const char *want[4];
	uint32_t nw = 0;
	if (d->has_host_import)
		want[nw++] = VK_EXT_EXTERNAL_MEMORY_HOST_EXTENSION_NAME;
	if (d->has_dmabuf) {
		want[nw++] = VK_KHR_EXTERNAL_MEMORY_FD_EXTENSION_NAME;
		want[nw++] = VK_EXT_EXTERNAL_MEMORY_DMA_BUF_EXTENSION_NAME;
	}
	VkPhysicalDeviceVulkan12Features f12 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES, .timelineSemaphore = VK_TRUE};
	VkDeviceCreateInfo dci = {
	    .sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO, .pNext = &f12,
	    .queueCreateInfoCount = separate ? 2 : 1, .pQueueCreateInfos = qci,
	    .enabledExtensionCount = nw, .ppEnabledExtensionNames = want};
	r = vkCreateDevice(d->pd, &dci, NULL, &d->dev);
	if (r) {
		*why = vk_result(r);
		return -1;
	}
#define LOADD(f) f = (PFN_##f)vkGetDeviceProcAddr(d->dev, #f); if (!f) { *why = "missing " #f; return -1; }
	VK_DEVICE_FNS(LOADD)
#undef LOADD
	if (d->has_host_import)
		vkGetMemoryHostPointerPropertiesEXT = (PFN_vkGetMemoryHostPointerPropertiesEXT)vkGetDeviceProcAddr(d->dev, "vkGetMemoryHostPointerPropertiesEXT");
	if (d->has_dmabuf)
		vkGetMemoryFdPropertiesKHR = (PFN_vkGetMemoryFdPropertiesKHR)vkGetDeviceProcAddr(d->dev, "vkGetMemoryFdPropertiesKHR");
	for (uint32_t i = 0; i < d->ncompute; i++)
		vkGetDeviceQueue(d->dev, d->compute_family, i, &d->cq[i]);
	for (uint32_t i = 0; i < d->ntransfer; i++)
		vkGetDeviceQueue(d->dev, d->transfer_family, i, &d->tq[i]);
	return 0;
}

void vk_close(struct vkdev *d)
{
	if (d->dev) {
		vkDeviceWaitIdle(d->dev);
		vkDestroyDevice(d->dev, NULL);
	}
	if (d->inst)
		vkDestroyInstance(d->inst, NULL);
	memset(d, 0, sizeof *d);
}

/* pick_type returns the first memory type in bits with all of want, else -1. */
static int pick_type(struct vkdev *d, uint32_t bits, VkMemoryPropertyFlags want)
{
	for (uint32_t i = 0; i < d->mem.memoryTypeCount; i++)
		if ((bits & (1u << i)) && (d->mem.memoryTypes[i].propertyFlags & want) == want)
			return (int)i;
	return -1;
}

static const VkBufferUsageFlags usage = VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT | VK_BUFFER_USAGE_STORAGE_BUFFER_BIT;

static VkResult make_buffer(struct vkdev *d, VkDeviceSize size, const void *pnext, VkBuffer *buf, VkMemoryRequirements *req)
{
	VkBufferCreateInfo bci = {.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO, .pNext = pnext, .size = size, .usage = usage, .sharingMode = VK_SHARING_MODE_EXCLUSIVE};
	VkResult r = vkCreateBuffer(d->dev, &bci, NULL, buf);
	if (!r)
		vkGetBufferMemoryRequirements(d->dev, *buf, req);
	return r;
}

static int alloc_bound(struct vkdev *d, VkDeviceSize size, VkMemoryPropertyFlags want, struct vkbuf *b)
{
	memset(b, 0, sizeof *b);
	VkMemoryRequirements req;
	if (make_buffer(d, size, NULL, &b->buf, &req))
		return -1;
	int t = pick_type(d, req.memoryTypeBits, want);
	if (t < 0)
		return -1;
	VkMemoryAllocateInfo mai = {.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO, .allocationSize = req.size, .memoryTypeIndex = (uint32_t)t};
	if (vkAllocateMemory(d->dev, &mai, NULL, &b->mem) || vkBindBufferMemory(d->dev, b->buf, b->mem, 0))
		return -1;
	b->size = size;
	return 0;
}

int vk_device_buffer(struct vkdev *d, VkDeviceSize size, struct vkbuf *b)
{
	return alloc_bound(d, size, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, b);
}

/* A staging buffer as webgpu.h implementations make one: the driver's own
 * host-visible coherent memory, mapped once. */
int vk_staging_buffer(struct vkdev *d, VkDeviceSize size, struct vkbuf *b)
{
	if (alloc_bound(d, size, VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT, b))
		return -1;
	return vkMapMemory(d->dev, b->mem, 0, VK_WHOLE_SIZE, 0, &b->host) ? -1 : 0;
}

/* vk_import_host imports [p, p+size) (aligned to minImportedHostPointerAlignment)
 * as the memory of a new buffer; typebits gets what the driver reports for p. */
VkResult vk_import_host(struct vkdev *d, void *p, VkDeviceSize size, struct vkbuf *b, uint32_t *typebits)
{
	memset(b, 0, sizeof *b);
	*typebits = 0;
	if (!d->has_host_import)
		return VK_ERROR_EXTENSION_NOT_PRESENT;
	const VkExternalMemoryHandleTypeFlagBits ht = VK_EXTERNAL_MEMORY_HANDLE_TYPE_HOST_ALLOCATION_BIT_EXT;
	VkMemoryHostPointerPropertiesEXT hpp = {.sType = VK_STRUCTURE_TYPE_MEMORY_HOST_POINTER_PROPERTIES_EXT};
	VkResult r = vkGetMemoryHostPointerPropertiesEXT(d->dev, ht, p, &hpp);
	if (r)
		return r;
	*typebits = hpp.memoryTypeBits;
	VkExternalMemoryBufferCreateInfo ext = {.sType = VK_STRUCTURE_TYPE_EXTERNAL_MEMORY_BUFFER_CREATE_INFO, .handleTypes = ht};
	VkMemoryRequirements req;
	if ((r = make_buffer(d, size, &ext, &b->buf, &req)))
		return r;
	int t = pick_type(d, req.memoryTypeBits & hpp.memoryTypeBits, 0);
	if (t < 0)
		return VK_ERROR_FEATURE_NOT_PRESENT;
	VkImportMemoryHostPointerInfoEXT imp = {.sType = VK_STRUCTURE_TYPE_IMPORT_MEMORY_HOST_POINTER_INFO_EXT, .handleType = ht, .pHostPointer = p};
	VkMemoryAllocateInfo mai = {.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO, .pNext = &imp, .allocationSize = size, .memoryTypeIndex = (uint32_t)t};
	if ((r = vkAllocateMemory(d->dev, &mai, NULL, &b->mem)))
		return r;
	if ((r = vkBindBufferMemory(d->dev, b->buf, b->mem, 0)))
		return r;
	b->size = size;
	b->host = p;
	return VK_SUCCESS;
}

/* vk_import_dmabuf imports a dma-buf fd (a duplicate is handed over: a
 * successful import owns the fd it is given). */
VkResult vk_import_dmabuf(struct vkdev *d, int fd, VkDeviceSize size, struct vkbuf *b, uint32_t *typebits)
{
	memset(b, 0, sizeof *b);
	*typebits = 0;
	if (!d->has_dmabuf)
		return VK_ERROR_EXTENSION_NOT_PRESENT;
	const VkExternalMemoryHandleTypeFlagBits ht = VK_EXTERNAL_MEMORY_HANDLE_TYPE_DMA_BUF_BIT_EXT;
	VkMemoryFdPropertiesKHR fp = {.sType = VK_STRUCTURE_TYPE_MEMORY_FD_PROPERTIES_KHR};
	VkResult r = vkGetMemoryFdPropertiesKHR(d->dev, ht, fd, &fp);
	if (r)
		return r;
	*typebits = fp.memoryTypeBits;
	VkExternalMemoryBufferCreateInfo ext = {.sType = VK_STRUCTURE_TYPE_EXTERNAL_MEMORY_BUFFER_CREATE_INFO, .handleTypes = ht};
	VkMemoryRequirements req;
	if ((r = make_buffer(d, size, &ext, &b->buf, &req)))
		return r;
	int t = pick_type(d, req.memoryTypeBits & fp.memoryTypeBits, 0);
	if (t < 0)
		return VK_ERROR_FEATURE_NOT_PRESENT;
	int dup_fd = dup(fd);
	VkImportMemoryFdInfoKHR imp = {.sType = VK_STRUCTURE_TYPE_IMPORT_MEMORY_FD_INFO_KHR, .handleType = ht, .fd = dup_fd};
	VkMemoryAllocateInfo mai = {.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO, .pNext = &imp, .allocationSize = size, .memoryTypeIndex = (uint32_t)t};
	if ((r = vkAllocateMemory(d->dev, &mai, NULL, &b->mem))) {
		close(dup_fd);
		return r;
	}
	if ((r = vkBindBufferMemory(d->dev, b->buf, b->mem, 0)))
		return r;
	b->size = size;
	return VK_SUCCESS;
}

void vk_free_buffer(struct vkdev *d, struct vkbuf *b)
{
	if (b->buf)
		vkDestroyBuffer(d->dev, b->buf, NULL);
	if (b->mem)
		vkFreeMemory(d->dev, b->mem, NULL);
	memset(b, 0, sizeof *b);
}
