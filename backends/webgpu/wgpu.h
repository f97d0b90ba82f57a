// The subset of the webgpu.h C ABI (Dawn's 2025 revision, StringView
// labels, callback-info structs) that s4d uses. Only what is declared here
// is bound; layout_test.go checks sizes and field offsets.
#ifndef S4D_WGPU_H
#define S4D_WGPU_H

#include <stddef.h>
#include <stdint.h>

typedef uint32_t WGPUBool;
typedef uint64_t WGPUFlags;
typedef struct WGPUInstanceImpl* WGPUInstance;
typedef struct WGPUAdapterImpl* WGPUAdapter;
typedef struct WGPUDeviceImpl* WGPUDevice;
typedef struct WGPUQueueImpl* WGPUQueue;
typedef struct WGPUBufferImpl* WGPUBuffer;
typedef struct WGPUShaderModuleImpl* WGPUShaderModule;
typedef struct WGPUComputePipelineImpl* WGPUComputePipeline;
typedef struct WGPUBindGroupLayoutImpl* WGPUBindGroupLayout;
typedef struct WGPUBindGroupImpl* WGPUBindGroup;
typedef struct WGPUCommandEncoderImpl* WGPUCommandEncoder;
typedef struct WGPUComputePassEncoderImpl* WGPUComputePassEncoder;
typedef struct WGPUCommandBufferImpl* WGPUCommandBuffer;
typedef struct WGPUPipelineLayoutImpl* WGPUPipelineLayout;

typedef struct WGPUStringView {
    const char* data;
    size_t length;
} WGPUStringView;

typedef struct WGPUChainedStruct {
    struct WGPUChainedStruct* next;
    uint32_t sType;
} WGPUChainedStruct;

typedef struct WGPUFuture { uint64_t id; } WGPUFuture;

enum {
    S4D_STYPE_SHADER_SOURCE_WGSL = 2,
    S4D_CALLBACK_MODE_ALLOW_PROCESS_EVENTS = 2,
    S4D_BACKEND_NULL = 1,
    S4D_ADAPTER_CPU = 3,
    S4D_FEATURE_LEVEL_CORE = 2,
    S4D_POWER_HIGH_PERFORMANCE = 2,
    S4D_ERROR_FILTER_VALIDATION = 1,
    S4D_ERROR_FILTER_OUT_OF_MEMORY = 2,
    S4D_STATUS_SUCCESS = 1,
};

#define S4D_BUFFER_MAP_READ ((WGPUFlags)0x1)
#define S4D_BUFFER_MAP_WRITE ((WGPUFlags)0x2)
#define S4D_BUFFER_COPY_SRC ((WGPUFlags)0x4)
#define S4D_BUFFER_COPY_DST ((WGPUFlags)0x8)
#define S4D_BUFFER_UNIFORM ((WGPUFlags)0x40)
#define S4D_BUFFER_STORAGE ((WGPUFlags)0x80)
#define S4D_MAP_READ ((WGPUFlags)0x1)
#define S4D_MAP_WRITE ((WGPUFlags)0x2)

typedef void (*WGPURequestAdapterCallback)(uint32_t status, WGPUAdapter adapter, WGPUStringView message, void* u1, void* u2);
typedef void (*WGPURequestDeviceCallback)(uint32_t status, WGPUDevice device, WGPUStringView message, void* u1, void* u2);
typedef void (*WGPUBufferMapCallback)(uint32_t status, WGPUStringView message, void* u1, void* u2);
typedef void (*WGPUPopErrorScopeCallback)(uint32_t status, uint32_t type, WGPUStringView message, void* u1, void* u2);
typedef void (*WGPUDeviceLostCallback)(WGPUDevice const* device, uint32_t reason, WGPUStringView message, void* u1, void* u2);
typedef void (*WGPUUncapturedErrorCallback)(WGPUDevice const* device, uint32_t type, WGPUStringView message, void* u1, void* u2);

// Every *CallbackInfo with a mode has this shape.
typedef struct WGPUCallbackInfo {
    WGPUChainedStruct* nextInChain;
    uint32_t mode;
    void* callback;
    void* userdata1;
    void* userdata2;
} WGPUCallbackInfo;

typedef struct WGPUUncapturedErrorCallbackInfo {
    WGPUChainedStruct* nextInChain;
    WGPUUncapturedErrorCallback callback;
    void* userdata1;
    void* userdata2;
} WGPUUncapturedErrorCallbackInfo;

typedef struct WGPURequestAdapterOptions {
    WGPUChainedStruct* nextInChain;
    uint32_t featureLevel;
    uint32_t powerPreference;
    WGPUBool forceFallbackAdapter;
    uint32_t backendType;
    void* compatibleSurface;
} WGPURequestAdapterOptions;

typedef struct WGPUAdapterInfo {
    WGPUChainedStruct* nextInChain;
    WGPUStringView vendor;
    WGPUStringView architecture;
    WGPUStringView device;
    WGPUStringView description;
    uint32_t backendType;
    uint32_t adapterType;
    uint32_t vendorID;
    uint32_t deviceID;
    uint32_t subgroupMinSize;
    uint32_t subgroupMaxSize;
} WGPUAdapterInfo;

typedef struct WGPULimits {
    WGPUChainedStruct* nextInChain;
    uint32_t maxTextureDimension1D;
    uint32_t maxTextureDimension2D;
    uint32_t maxTextureDimension3D;
    uint32_t maxTextureArrayLayers;
    uint32_t maxBindGroups;
    uint32_t maxBindGroupsPlusVertexBuffers;
    uint32_t maxBindingsPerBindGroup;
    uint32_t maxDynamicUniformBuffersPerPipelineLayout;
    uint32_t maxDynamicStorageBuffersPerPipelineLayout;
    uint32_t maxSampledTexturesPerShaderStage;
    uint32_t maxSamplersPerShaderStage;
    uint32_t maxStorageBuffersPerShaderStage;
    uint32_t maxStorageTexturesPerShaderStage;
    uint32_t maxUniformBuffersPerShaderStage;
    uint64_t maxUniformBufferBindingSize;
    uint64_t maxStorageBufferBindingSize;
    uint32_t minUniformBufferOffsetAlignment;
    uint32_t minStorageBufferOffsetAlignment;
    uint32_t maxVertexBuffers;
    uint64_t maxBufferSize;
    uint32_t maxVertexAttributes;
    uint32_t maxVertexBufferArrayStride;
    uint32_t maxInterStageShaderVariables;
    uint32_t maxColorAttachments;
    uint32_t maxColorAttachmentBytesPerSample;
    uint32_t maxComputeWorkgroupStorageSize;
    uint32_t maxComputeInvocationsPerWorkgroup;
    uint32_t maxComputeWorkgroupSizeX;
    uint32_t maxComputeWorkgroupSizeY;
    uint32_t maxComputeWorkgroupSizeZ;
    uint32_t maxComputeWorkgroupsPerDimension;
    uint32_t maxStorageBuffersInVertexStage;
    uint32_t maxStorageTexturesInVertexStage;
    uint32_t maxStorageBuffersInFragmentStage;
    uint32_t maxStorageTexturesInFragmentStage;
} WGPULimits;

typedef struct WGPUQueueDescriptor {
    WGPUChainedStruct* nextInChain;
    WGPUStringView label;
} WGPUQueueDescriptor;

typedef struct WGPUDeviceDescriptor {
    WGPUChainedStruct* nextInChain;
    WGPUStringView label;
    size_t requiredFeatureCount;
    const uint32_t* requiredFeatures;
    const WGPULimits* requiredLimits;
    WGPUQueueDescriptor defaultQueue;
    WGPUCallbackInfo deviceLostCallbackInfo;
    WGPUUncapturedErrorCallbackInfo uncapturedErrorCallbackInfo;
} WGPUDeviceDescriptor;

typedef struct WGPUBufferDescriptor {
    WGPUChainedStruct* nextInChain;
    WGPUStringView label;
    WGPUFlags usage;
    uint64_t size;
    WGPUBool mappedAtCreation;
} WGPUBufferDescriptor;

typedef struct WGPUShaderSourceWGSL {
    WGPUChainedStruct chain;
    WGPUStringView code;
} WGPUShaderSourceWGSL;

typedef struct WGPUShaderModuleDescriptor {
    WGPUChainedStruct* nextInChain;
    WGPUStringView label;
} WGPUShaderModuleDescriptor;

typedef struct WGPUComputeState {
    WGPUChainedStruct* nextInChain;
    WGPUShaderModule module;
    WGPUStringView entryPoint;
    size_t constantCount;
    const void* constants;
} WGPUComputeState;

typedef struct WGPUComputePipelineDescriptor {
    WGPUChainedStruct* nextInChain;
    WGPUStringView label;
    WGPUPipelineLayout layout;
    WGPUComputeState compute;
} WGPUComputePipelineDescriptor;

typedef struct WGPUBindGroupEntry {
    WGPUChainedStruct* nextInChain;
    uint32_t binding;
    WGPUBuffer buffer;
    uint64_t offset;
    uint64_t size;
    void* sampler;
    void* textureView;
} WGPUBindGroupEntry;

typedef struct WGPUBindGroupDescriptor {
    WGPUChainedStruct* nextInChain;
    WGPUStringView label;
    WGPUBindGroupLayout layout;
    size_t entryCount;
    const WGPUBindGroupEntry* entries;
} WGPUBindGroupDescriptor;

// Function pointer types of the entry points used.
typedef WGPUInstance (*PFN_CreateInstance)(const void* desc);
typedef void (*PFN_InstanceProcessEvents)(WGPUInstance);
typedef WGPUFuture (*PFN_InstanceRequestAdapter)(WGPUInstance, const WGPURequestAdapterOptions*, WGPUCallbackInfo);
typedef void (*PFN_InstanceRelease)(WGPUInstance);
typedef uint32_t (*PFN_AdapterGetInfo)(WGPUAdapter, WGPUAdapterInfo*);
typedef void (*PFN_AdapterInfoFreeMembers)(WGPUAdapterInfo);
typedef uint32_t (*PFN_AdapterGetLimits)(WGPUAdapter, WGPULimits*);
typedef WGPUBool (*PFN_AdapterHasFeature)(WGPUAdapter, uint32_t);
typedef WGPUFuture (*PFN_AdapterRequestDevice)(WGPUAdapter, const WGPUDeviceDescriptor*, WGPUCallbackInfo);
typedef void (*PFN_AdapterRelease)(WGPUAdapter);
typedef WGPUQueue (*PFN_DeviceGetQueue)(WGPUDevice);
typedef WGPUBuffer (*PFN_DeviceCreateBuffer)(WGPUDevice, const WGPUBufferDescriptor*);
typedef WGPUShaderModule (*PFN_DeviceCreateShaderModule)(WGPUDevice, const WGPUShaderModuleDescriptor*);
typedef WGPUComputePipeline (*PFN_DeviceCreateComputePipeline)(WGPUDevice, const WGPUComputePipelineDescriptor*);
typedef WGPUBindGroup (*PFN_DeviceCreateBindGroup)(WGPUDevice, const WGPUBindGroupDescriptor*);
typedef WGPUCommandEncoder (*PFN_DeviceCreateCommandEncoder)(WGPUDevice, const void*);
typedef void (*PFN_DevicePushErrorScope)(WGPUDevice, uint32_t);
typedef WGPUFuture (*PFN_DevicePopErrorScope)(WGPUDevice, WGPUCallbackInfo);
typedef void (*PFN_DeviceDestroy)(WGPUDevice);
typedef void (*PFN_DeviceRelease)(WGPUDevice);
typedef WGPUBindGroupLayout (*PFN_ComputePipelineGetBindGroupLayout)(WGPUComputePipeline, uint32_t);
typedef void (*PFN_ComputePipelineRelease)(WGPUComputePipeline);
typedef void (*PFN_BindGroupLayoutRelease)(WGPUBindGroupLayout);
typedef void (*PFN_BindGroupRelease)(WGPUBindGroup);
typedef void (*PFN_ShaderModuleRelease)(WGPUShaderModule);
typedef void (*PFN_BufferDestroy)(WGPUBuffer);
typedef void (*PFN_BufferRelease)(WGPUBuffer);
typedef void* (*PFN_BufferGetMappedRange)(WGPUBuffer, size_t, size_t);
typedef const void* (*PFN_BufferGetConstMappedRange)(WGPUBuffer, size_t, size_t);
typedef WGPUFuture (*PFN_BufferMapAsync)(WGPUBuffer, WGPUFlags, size_t, size_t, WGPUCallbackInfo);
typedef void (*PFN_BufferUnmap)(WGPUBuffer);
typedef WGPUComputePassEncoder (*PFN_CommandEncoderBeginComputePass)(WGPUCommandEncoder, const void*);
typedef void (*PFN_CommandEncoderCopyBufferToBuffer)(WGPUCommandEncoder, WGPUBuffer, uint64_t, WGPUBuffer, uint64_t, uint64_t);
typedef WGPUCommandBuffer (*PFN_CommandEncoderFinish)(WGPUCommandEncoder, const void*);
typedef void (*PFN_CommandEncoderRelease)(WGPUCommandEncoder);
typedef void (*PFN_ComputePassEncoderSetPipeline)(WGPUComputePassEncoder, WGPUComputePipeline);
typedef void (*PFN_ComputePassEncoderSetBindGroup)(WGPUComputePassEncoder, uint32_t, WGPUBindGroup, size_t, const uint32_t*);
typedef void (*PFN_ComputePassEncoderDispatchWorkgroups)(WGPUComputePassEncoder, uint32_t, uint32_t, uint32_t);
typedef void (*PFN_ComputePassEncoderEnd)(WGPUComputePassEncoder);
typedef void (*PFN_ComputePassEncoderRelease)(WGPUComputePassEncoder);
typedef void (*PFN_CommandBufferRelease)(WGPUCommandBuffer);
typedef void (*PFN_QueueSubmit)(WGPUQueue, size_t, const WGPUCommandBuffer*);
typedef void (*PFN_QueueWriteBuffer)(WGPUQueue, WGPUBuffer, uint64_t, const void*, size_t);
typedef void (*PFN_QueueRelease)(WGPUQueue);

#endif
