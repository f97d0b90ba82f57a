package vk

import "testing"

// The sizes and offsets of the Vulkan structs the binding uses, as
// vulkan_core.h (1.3.239, x86-64) gives them. A wrong field in vkmin.h
// shifts these and fails here before it can corrupt a call.
func TestLayout(t *testing.T) {
	want := []struct {
		name string
		v    int64
	}{
		{"sizeof VkApplicationInfo", 48},
		{"offsetof VkApplicationInfo.apiVersion", 44},
		{"sizeof VkInstanceCreateInfo", 64},
		{"offsetof VkInstanceCreateInfo.ppEnabledExtensionNames", 56},
		{"sizeof VkPhysicalDeviceProperties", 824},
		{"offsetof VkPhysicalDeviceProperties.deviceName", 20},
		{"offsetof VkPhysicalDeviceProperties.limits", 296},
		{"offsetof VkPhysicalDeviceProperties.sparseProperties", 800},
		{"sizeof VkPhysicalDeviceProperties2", 840},
		{"offsetof VkPhysicalDeviceProperties2.properties", 16},
		{"sizeof VkPhysicalDeviceExternalMemoryHostPropertiesEXT", 24},
		{"offsetof VkPhysicalDeviceExternalMemoryHostPropertiesEXT.minImportedHostPointerAlignment", 16},
		{"sizeof VkPhysicalDeviceDriverProperties", 536},
		{"offsetof VkPhysicalDeviceDriverProperties.driverInfo", 276},
		{"sizeof VkQueueFamilyProperties", 24},
		{"sizeof VkExtensionProperties", 260},
		{"sizeof VkPhysicalDeviceMemoryProperties", 520},
		{"offsetof VkPhysicalDeviceMemoryProperties.memoryHeapCount", 260},
		{"offsetof VkPhysicalDeviceMemoryProperties.memoryHeaps", 264},
		{"sizeof VkDeviceQueueCreateInfo", 40},
		{"offsetof VkDeviceQueueCreateInfo.pQueuePriorities", 32},
		{"sizeof VkDeviceCreateInfo", 72},
		{"offsetof VkDeviceCreateInfo.ppEnabledExtensionNames", 56},
		{"offsetof VkDeviceCreateInfo.pEnabledFeatures", 64},
		{"sizeof VkPhysicalDeviceTimelineSemaphoreFeatures", 24},
		{"sizeof VkBufferCreateInfo", 56},
		{"offsetof VkBufferCreateInfo.size", 24},
		{"offsetof VkBufferCreateInfo.usage", 32},
		{"offsetof VkBufferCreateInfo.pQueueFamilyIndices", 48},
		{"sizeof VkExternalMemoryBufferCreateInfo", 24},
		{"sizeof VkMemoryRequirements", 24},
		{"sizeof VkMemoryAllocateInfo", 32},
		{"offsetof VkMemoryAllocateInfo.memoryTypeIndex", 24},
		{"sizeof VkImportMemoryHostPointerInfoEXT", 32},
		{"offsetof VkImportMemoryHostPointerInfoEXT.pHostPointer", 24},
		{"sizeof VkMemoryHostPointerPropertiesEXT", 24},
		{"sizeof VkCommandPoolCreateInfo", 24},
		{"sizeof VkCommandBufferAllocateInfo", 32},
		{"offsetof VkCommandBufferAllocateInfo.commandBufferCount", 28},
		{"sizeof VkCommandBufferBeginInfo", 32},
		{"sizeof VkBufferCopy", 24},
		{"sizeof VkMemoryBarrier", 24},
		{"sizeof VkSemaphoreTypeCreateInfo", 32},
		{"offsetof VkSemaphoreTypeCreateInfo.initialValue", 24},
		{"sizeof VkSemaphoreCreateInfo", 24},
		{"sizeof VkTimelineSemaphoreSubmitInfo", 48},
		{"offsetof VkTimelineSemaphoreSubmitInfo.pSignalSemaphoreValues", 40},
		{"sizeof VkSubmitInfo", 72},
		{"offsetof VkSubmitInfo.pCommandBuffers", 48},
		{"offsetof VkSubmitInfo.pSignalSemaphores", 64},
		{"sizeof VkSemaphoreWaitInfo", 40},
		{"offsetof VkSemaphoreWaitInfo.pValues", 32},
		{"sizeof VkShaderModuleCreateInfo", 40},
		{"offsetof VkShaderModuleCreateInfo.pCode", 32},
		{"sizeof VkDescriptorSetLayoutBinding", 24},
		{"sizeof VkDescriptorSetLayoutCreateInfo", 32},
		{"sizeof VkPipelineLayoutCreateInfo", 48},
		{"offsetof VkPipelineLayoutCreateInfo.pPushConstantRanges", 40},
		{"sizeof VkPipelineShaderStageCreateInfo", 48},
		{"offsetof VkPipelineShaderStageCreateInfo.pName", 32},
		{"sizeof VkComputePipelineCreateInfo", 96},
		{"offsetof VkComputePipelineCreateInfo.stage", 24},
		{"offsetof VkComputePipelineCreateInfo.layout", 72},
		{"offsetof VkComputePipelineCreateInfo.basePipelineIndex", 88},
		{"sizeof VkDescriptorPoolSize", 8},
		{"sizeof VkDescriptorPoolCreateInfo", 40},
		{"offsetof VkDescriptorPoolCreateInfo.pPoolSizes", 32},
		{"sizeof VkDescriptorSetAllocateInfo", 40},
		{"sizeof VkDescriptorBufferInfo", 24},
		{"sizeof VkWriteDescriptorSet", 64},
		{"offsetof VkWriteDescriptorSet.descriptorType", 36},
		{"offsetof VkWriteDescriptorSet.pBufferInfo", 48},
	}
	for k, w := range want {
		if got := layoutOf(k); got != w.v {
			t.Errorf("%s = %d, want %d", w.name, got, w.v)
		}
	}
	if layoutOf(len(want)) != -1 {
		t.Errorf("layout table has entries this test does not check")
	}
}
