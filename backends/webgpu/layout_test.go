package webgpu

import "testing"

// The sizes and offsets of the webgpu.h structs as declared by Dawn for
// x86-64 (LP64). A wrong field in wgpu.h shifts these and fails here
// before it can corrupt a call.
func TestLayout(t *testing.T) {
	want := []struct {
		name string
		v    int64
	}{
		{"sizeof WGPUStringView", 16},
		{"sizeof WGPUChainedStruct", 16},
		{"sizeof WGPUCallbackInfo", 40},
		{"offsetof WGPUCallbackInfo.callback", 16},
		{"sizeof WGPURequestAdapterOptions", 32},
		{"offsetof WGPURequestAdapterOptions.compatibleSurface", 24},
		{"sizeof WGPUAdapterInfo", 96},
		{"offsetof WGPUAdapterInfo.backendType", 72},
		{"offsetof WGPUAdapterInfo.subgroupMaxSize", 92},
		{"sizeof WGPULimits", 168},
		{"offsetof WGPULimits.maxStorageBufferBindingSize", 72},
		{"offsetof WGPULimits.maxBufferSize", 96},
		{"offsetof WGPULimits.maxComputeWorkgroupStorageSize", 124},
		{"offsetof WGPULimits.maxComputeWorkgroupsPerDimension", 144},
		{"sizeof WGPUDeviceDescriptor", 144},
		{"offsetof WGPUDeviceDescriptor.requiredLimits", 40},
		{"offsetof WGPUDeviceDescriptor.deviceLostCallbackInfo", 72},
		{"offsetof WGPUDeviceDescriptor.uncapturedErrorCallbackInfo", 112},
		{"sizeof WGPUBufferDescriptor", 48},
		{"offsetof WGPUBufferDescriptor.usage", 24},
		{"offsetof WGPUBufferDescriptor.mappedAtCreation", 40},
		{"sizeof WGPUShaderSourceWGSL", 32},
		{"sizeof WGPUComputePipelineDescriptor", 80},
		{"offsetof WGPUComputePipelineDescriptor.compute", 32},
		{"offsetof WGPUComputeState.entryPoint", 16},
		{"sizeof WGPUBindGroupEntry", 56},
		{"offsetof WGPUBindGroupEntry.buffer", 16},
		{"offsetof WGPUBindGroupEntry.size", 32},
		{"sizeof WGPUBindGroupDescriptor", 48},
		{"offsetof WGPUBindGroupDescriptor.entries", 40},
		{"sizeof WGPUUncapturedErrorCallbackInfo", 32},
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
