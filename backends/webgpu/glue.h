// C side of the webgpu backend: the procedure table, callbacks that only
// record their results, and thin trampolines that build descriptors on the
// stack and call through the table.
#ifndef S4D_GLUE_H
#define S4D_GLUE_H
#include <stdlib.h>
#include <string.h>
#include "wgpu.h"

// Resolved entry points; filled from Go with dlsym results.
typedef struct s4d_procs {
    PFN_CreateInstance createInstance;
    PFN_InstanceProcessEvents instanceProcessEvents;
    PFN_InstanceRequestAdapter instanceRequestAdapter;
    PFN_InstanceRelease instanceRelease;
    PFN_AdapterGetInfo adapterGetInfo;
    PFN_AdapterInfoFreeMembers adapterInfoFreeMembers;
    PFN_AdapterGetLimits adapterGetLimits;
    PFN_AdapterHasFeature adapterHasFeature;
    PFN_AdapterRequestDevice adapterRequestDevice;
    PFN_AdapterRelease adapterRelease;
    PFN_DeviceGetQueue deviceGetQueue;
    PFN_DeviceCreateBuffer deviceCreateBuffer;
    PFN_DeviceCreateShaderModule deviceCreateShaderModule;
    PFN_DeviceCreateComputePipeline deviceCreateComputePipeline;
    PFN_DeviceCreateBindGroup deviceCreateBindGroup;
    PFN_DeviceCreateCommandEncoder deviceCreateCommandEncoder;
    PFN_DevicePushErrorScope devicePushErrorScope;
    PFN_DevicePopErrorScope devicePopErrorScope;
    PFN_DeviceDestroy deviceDestroy;
    PFN_DeviceRelease deviceRelease;
    PFN_ComputePipelineGetBindGroupLayout computePipelineGetBindGroupLayout;
    PFN_ComputePipelineRelease computePipelineRelease;
    PFN_BindGroupLayoutRelease bindGroupLayoutRelease;
    PFN_BindGroupRelease bindGroupRelease;
    PFN_ShaderModuleRelease shaderModuleRelease;
    PFN_BufferDestroy bufferDestroy;
    PFN_BufferRelease bufferRelease;
    PFN_BufferGetMappedRange bufferGetMappedRange;
    PFN_BufferGetConstMappedRange bufferGetConstMappedRange;
    PFN_BufferMapAsync bufferMapAsync;
    PFN_BufferUnmap bufferUnmap;
    PFN_CommandEncoderBeginComputePass commandEncoderBeginComputePass;
    PFN_CommandEncoderCopyBufferToBuffer commandEncoderCopyBufferToBuffer;
    PFN_CommandEncoderFinish commandEncoderFinish;
    PFN_CommandEncoderRelease commandEncoderRelease;
    PFN_ComputePassEncoderSetPipeline computePassEncoderSetPipeline;
    PFN_ComputePassEncoderSetBindGroup computePassEncoderSetBindGroup;
    PFN_ComputePassEncoderDispatchWorkgroups computePassEncoderDispatchWorkgroups;
    PFN_ComputePassEncoderEnd computePassEncoderEnd;
    PFN_ComputePassEncoderRelease computePassEncoderRelease;
    PFN_CommandBufferRelease commandBufferRelease;
    PFN_QueueSubmit queueSubmit;
    PFN_QueueWriteBuffer queueWriteBuffer;
    PFN_QueueRelease queueRelease;
} s4d_procs;

// One pending asynchronous call. Callbacks only store their result here:
// they run inside ProcessEvents on the device thread and must not block.
typedef struct s4d_wait {
    volatile int done;
    uint32_t status;
    uint32_t type;
    void* handle;
    char msg[512];
} s4d_wait;

// Device-wide fault flags set by the lost / uncaptured-error callbacks.
typedef struct s4d_devstate {
    volatile int lost;
    volatile int errors;
    char msg[512];
} s4d_devstate;

// Limits written by the library may carry fields newer than our
// declaration: the padding keeps such writes inside our allocation.
typedef struct s4d_limits {
    WGPULimits l;
    unsigned char pad[1024];
} s4d_limits;

typedef struct s4d_info {
    WGPUAdapterInfo i;
    unsigned char pad[1024];
} s4d_info;

static inline void s4d_copymsg(char* dst, WGPUStringView m) {
    size_t n = 0;
    if (m.data != NULL) {
        n = m.length == SIZE_MAX ? strlen(m.data) : m.length;
        if (n > 511) n = 511;
        memcpy(dst, m.data, n);
    }
    dst[n] = 0;
}

static inline void s4d_on_adapter(uint32_t status, WGPUAdapter a, WGPUStringView m, void* u1, void* u2) {
    s4d_wait* w = u1; w->status = status; w->handle = a; s4d_copymsg(w->msg, m); w->done = 1;
}
static inline void s4d_on_device(uint32_t status, WGPUDevice d, WGPUStringView m, void* u1, void* u2) {
    s4d_wait* w = u1; w->status = status; w->handle = d; s4d_copymsg(w->msg, m); w->done = 1;
}
static inline void s4d_on_map(uint32_t status, WGPUStringView m, void* u1, void* u2) {
    s4d_wait* w = u1; w->status = status; s4d_copymsg(w->msg, m); w->done = 1;
}
static inline void s4d_on_pop(uint32_t status, uint32_t type, WGPUStringView m, void* u1, void* u2) {
    s4d_wait* w = u1; w->status = status; w->type = type; s4d_copymsg(w->msg, m); w->done = 1;
}
static inline void s4d_on_lost(WGPUDevice const* d, uint32_t reason, WGPUStringView m, void* u1, void* u2) {
    s4d_devstate* s = u1; s4d_copymsg(s->msg, m); s->lost = 1;
}
static inline void s4d_on_error(WGPUDevice const* d, uint32_t type, WGPUStringView m, void* u1, void* u2) {
    s4d_devstate* s = u1; s4d_copymsg(s->msg, m); s->errors++;
}

static inline WGPUCallbackInfo s4d_cb(void* fn, void* u1) {
    WGPUCallbackInfo ci = {0};
    ci.mode = S4D_CALLBACK_MODE_ALLOW_PROCESS_EVENTS;
    ci.callback = fn;
    ci.userdata1 = u1;
    return ci;
}

static inline WGPUInstance s4d_create_instance(s4d_procs* p) { return p->createInstance(NULL); }
static inline void s4d_process_events(s4d_procs* p, WGPUInstance i) { p->instanceProcessEvents(i); }

static inline void s4d_request_adapter(s4d_procs* p, WGPUInstance inst, s4d_wait* w) {
    WGPURequestAdapterOptions o = {0};
    o.featureLevel = S4D_FEATURE_LEVEL_CORE;
    o.powerPreference = S4D_POWER_HIGH_PERFORMANCE;
    p->instanceRequestAdapter(inst, &o, s4d_cb((void*)s4d_on_adapter, w));
}

static inline uint32_t s4d_adapter_info(s4d_procs* p, WGPUAdapter a, s4d_info* out, char* desc, size_t n) {
    memset(out, 0, sizeof *out);
    uint32_t st = p->adapterGetInfo(a, &out->i);
    desc[0] = 0;
    if (st == S4D_STATUS_SUCCESS) {
        // vendor / device / description, whichever are set.
        WGPUStringView parts[3] = {out->i.device, out->i.description, out->i.architecture};
        size_t off = 0;
        for (int k = 0; k < 3; k++) {
            WGPUStringView s = parts[k];
            if (s.data == NULL) continue;
            size_t l = s.length == SIZE_MAX ? strlen(s.data) : s.length;
            if (l == 0) continue;
            if (off > 0 && off + 3 < n) { memcpy(desc + off, " / ", 3); off += 3; }
            if (off + l >= n) l = n - off - 1;
            memcpy(desc + off, s.data, l);
            off += l;
        }
        desc[off] = 0;
    }
    return st;
}

static inline void s4d_adapter_info_free(s4d_procs* p, s4d_info* in) { p->adapterInfoFreeMembers(in->i); }

static inline uint32_t s4d_adapter_limits(s4d_procs* p, WGPUAdapter a, s4d_limits* l) {
    memset(l, 0, sizeof *l);
    return p->adapterGetLimits(a, &l->l);
}

static inline int s4d_has_feature(s4d_procs* p, WGPUAdapter a, uint32_t f) { return p->adapterHasFeature(a, f) != 0; }

static inline void s4d_request_device(s4d_procs* p, WGPUAdapter a, s4d_limits* lim, s4d_wait* w, s4d_devstate* st,
                                      const uint32_t* feats, size_t nfeats, const char* const* toggles, size_t ntoggles,
                                      const char* const* disabled, size_t ndisabled) {
    WGPUDeviceDescriptor d = {0};
    // Dawn's own extension (DawnTogglesDescriptor, sType 0x5000A in this
    // revision): device toggles by name; an unknown name is ignored.
    struct { WGPUChainedStruct chain; size_t enabledCount; const char* const* enabled;
             size_t disabledCount; const char* const* disabled; } tg = {{NULL, 0x5000A}, ntoggles, toggles, ndisabled, disabled};
    if (ntoggles > 0 || ndisabled > 0) d.nextInChain = &tg.chain;
    d.requiredFeatureCount = nfeats;
    d.requiredFeatures = feats;
    d.requiredLimits = &lim->l;
    lim->l.nextInChain = NULL;
    d.deviceLostCallbackInfo = s4d_cb((void*)s4d_on_lost, st);
    d.uncapturedErrorCallbackInfo.callback = s4d_on_error;
    d.uncapturedErrorCallbackInfo.userdata1 = st;
    p->adapterRequestDevice(a, &d, s4d_cb((void*)s4d_on_device, w));
}

// The toggles a Dawn device uses, from dawn::native::GetTogglesUsed (a
// C++ function returning std::vector<const char*>: by the SysV ABI the
// same as a returned struct of three pointers). Writes them, comma
// separated, into buf; the vector's storage is left (once per device).
typedef struct { const char** b; const char** e; const char** c; } s4d_cvec;
typedef s4d_cvec (*PFN_GetTogglesUsed)(WGPUDevice);
static inline void s4d_toggles_used(void* fn, WGPUDevice d, char* buf, size_t n) {
    buf[0] = 0;
    if (fn == NULL || n == 0) return;
    s4d_cvec v = ((PFN_GetTogglesUsed)fn)(d);
    size_t o = 0;
    for (const char** t = v.b; t != NULL && t < v.e; t++) {
        size_t l = strlen(*t);
        if (o + l + 2 >= n) break;
        if (o > 0) buf[o++] = ',';
        memcpy(buf + o, *t, l);
        o += l;
        buf[o] = 0;
    }
}

static inline WGPUBuffer s4d_create_buffer(s4d_procs* p, WGPUDevice d, WGPUFlags usage, uint64_t size, int mapped) {
    WGPUBufferDescriptor b = {0};
    b.label.length = SIZE_MAX;
    b.usage = usage;
    b.size = size;
    b.mappedAtCreation = mapped;
    return p->deviceCreateBuffer(d, &b);
}

static inline WGPUComputePipeline s4d_create_pipeline(s4d_procs* p, WGPUDevice d, const char* code, size_t n, const char* entry) {
    WGPUShaderSourceWGSL src = {0};
    src.chain.sType = S4D_STYPE_SHADER_SOURCE_WGSL;
    src.code.data = code;
    src.code.length = n;
    WGPUShaderModuleDescriptor md = {0};
    md.nextInChain = &src.chain;
    md.label.length = SIZE_MAX;
    WGPUShaderModule m = p->deviceCreateShaderModule(d, &md);
    if (m == NULL) return NULL;
    WGPUComputePipelineDescriptor cd = {0};
    cd.label.length = SIZE_MAX;
    cd.compute.module = m;
    cd.compute.entryPoint.data = entry;
    cd.compute.entryPoint.length = strlen(entry);
    WGPUComputePipeline pl = p->deviceCreateComputePipeline(d, &cd);
    p->shaderModuleRelease(m);
    return pl;
}

// Binds bufs[k] whole to binding k of group 0.
static inline WGPUBindGroup s4d_bind_group(s4d_procs* p, WGPUDevice d, WGPUComputePipeline pl, WGPUBuffer* bufs, uint64_t* sizes, int n) {
    WGPUBindGroupEntry e[8];
    memset(e, 0, sizeof e);
    for (int k = 0; k < n && k < 8; k++) {
        e[k].binding = k;
        e[k].buffer = bufs[k];
        e[k].size = sizes[k];
    }
    WGPUBindGroupLayout l = p->computePipelineGetBindGroupLayout(pl, 0);
    WGPUBindGroupDescriptor bd = {0};
    bd.label.length = SIZE_MAX;
    bd.layout = l;
    bd.entryCount = n;
    bd.entries = e;
    WGPUBindGroup g = p->deviceCreateBindGroup(d, &bd);
    p->bindGroupLayoutRelease(l);
    return g;
}

static inline void s4d_map_async(s4d_procs* p, WGPUBuffer b, WGPUFlags mode, size_t off, size_t size, s4d_wait* w) {
    p->bufferMapAsync(b, mode, off, size, s4d_cb((void*)s4d_on_map, w));
}

static inline void s4d_push_errors(s4d_procs* p, WGPUDevice d) {
    p->devicePushErrorScope(d, S4D_ERROR_FILTER_OUT_OF_MEMORY);
    p->devicePushErrorScope(d, S4D_ERROR_FILTER_VALIDATION);
}
static inline void s4d_pop_error(s4d_procs* p, WGPUDevice d, s4d_wait* w) {
    p->devicePopErrorScope(d, s4d_cb((void*)s4d_on_pop, w));
}

static inline WGPUCommandEncoder s4d_encoder(s4d_procs* p, WGPUDevice d) { return p->deviceCreateCommandEncoder(d, NULL); }
static inline void s4d_copy(s4d_procs* p, WGPUCommandEncoder e, WGPUBuffer s, uint64_t so, WGPUBuffer d, uint64_t dof, uint64_t n) {
    p->commandEncoderCopyBufferToBuffer(e, s, so, d, dof, n);
}
static inline void s4d_dispatch(s4d_procs* p, WGPUCommandEncoder e, WGPUComputePipeline pl, WGPUBindGroup g, uint32_t x, uint32_t y) {
    WGPUComputePassEncoder c = p->commandEncoderBeginComputePass(e, NULL);
    p->computePassEncoderSetPipeline(c, pl);
    p->computePassEncoderSetBindGroup(c, 0, g, 0, NULL);
    p->computePassEncoderDispatchWorkgroups(c, x, y, 1);
    p->computePassEncoderEnd(c);
    p->computePassEncoderRelease(c);
}
static inline void s4d_submit(s4d_procs* p, WGPUQueue q, WGPUCommandEncoder e) {
    WGPUCommandBuffer cb = p->commandEncoderFinish(e, NULL);
    p->commandEncoderRelease(e);
    p->queueSubmit(q, 1, &cb);
    p->commandBufferRelease(cb);
}
static inline void s4d_write(s4d_procs* p, WGPUQueue q, WGPUBuffer b, uint64_t off, const void* data, size_t n) {
    p->queueWriteBuffer(q, b, off, data, n);
}
static inline void* s4d_mapped(s4d_procs* p, WGPUBuffer b, size_t off, size_t n) { return p->bufferGetMappedRange(b, off, n); }
static inline const void* s4d_const_mapped(s4d_procs* p, WGPUBuffer b, size_t off, size_t n) { return p->bufferGetConstMappedRange(b, off, n); }
static inline void s4d_unmap(s4d_procs* p, WGPUBuffer b) { p->bufferUnmap(b); }
static inline void s4d_buffer_free(s4d_procs* p, WGPUBuffer b) { if (b) { p->bufferDestroy(b); p->bufferRelease(b); } }
static inline void s4d_bind_group_free(s4d_procs* p, WGPUBindGroup g) { if (g) p->bindGroupRelease(g); }
static inline void s4d_pipeline_free(s4d_procs* p, WGPUComputePipeline pl) { if (pl) p->computePipelineRelease(pl); }
static inline WGPUQueue s4d_queue(s4d_procs* p, WGPUDevice d) { return p->deviceGetQueue(d); }
static inline void s4d_device_free(s4d_procs* p, WGPUDevice d, WGPUQueue q) {
    if (q) p->queueRelease(q);
    if (d) { p->deviceDestroy(d); p->deviceRelease(d); }
}

/* Destroys the device but keeps the handle: what a GPU reset looks like
   to the code that still holds it. */
static inline void s4d_device_destroy(s4d_procs *p, WGPUDevice d) {
    if (d) p->deviceDestroy(d);
}
static inline void s4d_adapter_free(s4d_procs* p, WGPUAdapter a) { if (a) p->adapterRelease(a); }
static inline void s4d_instance_free(s4d_procs* p, WGPUInstance i) { if (i) p->instanceRelease(i); }

// Layout facts for layout_test.go.
#define S4D_OFF(t, f) ((long)offsetof(t, f))
static inline long s4d_layout(int k) {
    switch (k) {
    case 0: return sizeof(WGPUStringView);
    case 1: return sizeof(WGPUChainedStruct);
    case 2: return sizeof(WGPUCallbackInfo);
    case 3: return S4D_OFF(WGPUCallbackInfo, callback);
    case 4: return sizeof(WGPURequestAdapterOptions);
    case 5: return S4D_OFF(WGPURequestAdapterOptions, compatibleSurface);
    case 6: return sizeof(WGPUAdapterInfo);
    case 7: return S4D_OFF(WGPUAdapterInfo, backendType);
    case 8: return S4D_OFF(WGPUAdapterInfo, subgroupMaxSize);
    case 9: return sizeof(WGPULimits);
    case 10: return S4D_OFF(WGPULimits, maxStorageBufferBindingSize);
    case 11: return S4D_OFF(WGPULimits, maxBufferSize);
    case 12: return S4D_OFF(WGPULimits, maxComputeWorkgroupStorageSize);
    case 13: return S4D_OFF(WGPULimits, maxComputeWorkgroupsPerDimension);
    case 14: return sizeof(WGPUDeviceDescriptor);
    case 15: return S4D_OFF(WGPUDeviceDescriptor, requiredLimits);
    case 16: return S4D_OFF(WGPUDeviceDescriptor, deviceLostCallbackInfo);
    case 17: return S4D_OFF(WGPUDeviceDescriptor, uncapturedErrorCallbackInfo);
    case 18: return sizeof(WGPUBufferDescriptor);
    case 19: return S4D_OFF(WGPUBufferDescriptor, usage);
    case 20: return S4D_OFF(WGPUBufferDescriptor, mappedAtCreation);
    case 21: return sizeof(WGPUShaderSourceWGSL);
    case 22: return sizeof(WGPUComputePipelineDescriptor);
    case 23: return S4D_OFF(WGPUComputePipelineDescriptor, compute);
    case 24: return S4D_OFF(WGPUComputeState, entryPoint);
    case 25: return sizeof(WGPUBindGroupEntry);
    case 26: return S4D_OFF(WGPUBindGroupEntry, buffer);
    case 27: return S4D_OFF(WGPUBindGroupEntry, size);
    case 28: return sizeof(WGPUBindGroupDescriptor);
    case 29: return S4D_OFF(WGPUBindGroupDescriptor, entries);
    case 30: return sizeof(WGPUUncapturedErrorCallbackInfo);
    }
    return -1;
}
#endif
