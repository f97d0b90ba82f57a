// vkprobe's gather: one workgroup moves one 4 KiB page between the
// imported host buffer and the device buffer, in the order a table gives,
// so scattered client pages cross PCIe read (or written) by the shader
// itself with no copy command per page. Compiled to gather.spv.h with
// glslangValidator (make vkprobe-spirv); the header is committed.
#version 450
layout(local_size_x = 64) in;
layout(std430, set = 0, binding = 0) readonly buffer Src { uvec4 src[]; };
layout(std430, set = 0, binding = 1) writeonly buffer Dst { uvec4 dst[]; };
layout(std430, set = 0, binding = 2) readonly buffer Tab { uint tab[]; };
layout(push_constant) uniform P {
	uint base;    // first page of this batch, in device order
	uint scatter; // 0: gather host pages tab[j] to device page j; 1: device page j to host page tab[j]
} pc;
void main() {
	uint j = pc.base + gl_WorkGroupID.x;
	uint p = tab[j];
	uint s = pc.scatter != 0u ? j : p;
	uint d = pc.scatter != 0u ? p : j;
	for (uint i = gl_LocalInvocationID.x; i < 256u; i += 64u)
		dst[d * 256u + i] = src[s * 256u + i];
}
