// A GET's stored pages copied on the GPU (the Vulkan runtime's): raw
// pages from the store's slabs and pages the decompress kernel left in
// device memory, into the client's mapping, both imported, so that the
// host copies none of them. One page per workgroup: it is read into
// workgroup memory (each invocation a word at a time, so that neighbours
// read neighbouring words: a raw page in the store is only 4-aligned,
// behind its sum), each invocation runs the CRC-32C of PER contiguous
// words (the pieces combine as in storedSum), and the page is written
// only when it is right. Up to six sources a dispatch: WebGPU gives a
// stage eight storage buffers, and indexing an array of them needs a
// feature the WGSL engine does not ask for.
//
// desc[4*i .. 4*i+3]: the source (0-5) | 0x100 when the sum is to be
// checked, the page's word offset in it and in dst, the expected sum;
// desc[4*n + i] is set to 1 when the page was written, 0 when its sum
// did not match (dst left as it was).

struct Params {
    n: u32,
    pad0: u32,
    pad1: u32,
    pad2: u32,
}

@group(0) @binding(0) var<storage, read> s0: array<u32>;
@group(0) @binding(1) var<storage, read> s1: array<u32>;
@group(0) @binding(2) var<storage, read> s2: array<u32>;
@group(0) @binding(3) var<storage, read> s3: array<u32>;
@group(0) @binding(4) var<storage, read> s4: array<u32>;
@group(0) @binding(5) var<storage, read> s5: array<u32>;
@group(0) @binding(6) var<storage, read_write> desc: array<u32>;
@group(0) @binding(7) var<storage, read_write> dst: array<u32>;
@group(0) @binding(8) var<uniform> params: Params;

const PAGE_WORDS: u32 = PAGE_WORDS_V;
const PS: u32 = PAGE_WORDS * 4u;
const WG: u32 = 256u;
const PER: u32 = PAGE_WORDS / WG; // words an invocation sums (a multiple of 4)

var<workgroup> page: array<u32, PAGE_WORDS>;
var<workgroup> crcAcc: atomic<u32>;

// The page's words at, at+WG, at+2WG, at+3WG of source k: four loads
// issued at once (one switch for all four), so that each invocation has
// four reads across the bus in flight rather than one.
fn load4(k: u32, at: u32) -> vec4<u32> {
    switch k {
        case 0u: { return vec4<u32>(s0[at], s0[at + WG], s0[at + 2u * WG], s0[at + 3u * WG]); }
        case 1u: { return vec4<u32>(s1[at], s1[at + WG], s1[at + 2u * WG], s1[at + 3u * WG]); }
        case 2u: { return vec4<u32>(s2[at], s2[at + WG], s2[at + 2u * WG], s2[at + 3u * WG]); }
        case 3u: { return vec4<u32>(s3[at], s3[at + WG], s3[at + 2u * WG], s3[at + 3u * WG]); }
        case 4u: { return vec4<u32>(s4[at], s4[at + WG], s4[at + 2u * WG], s4[at + 3u * WG]); }
        default: { return vec4<u32>(s5[at], s5[at + WG], s5[at + 2u * WG], s5[at + 3u * WG]); }
    }
}

@compute @workgroup_size(WG)
fn gather(@builtin(workgroup_id) wid: vec3<u32>,
          @builtin(num_workgroups) nwg: vec3<u32>,
          @builtin(local_invocation_index) t: u32) {
    let i = wid.y * nwg.x + wid.x;
    if (i >= params.n) {
        return;
    }
    if (t == 0u) { atomicStore(&crcAcc, 0u); }
    let how = desc[4u * i];
    let at0 = desc[4u * i + 1u];
    for (var w = t; w < PAGE_WORDS; w = w + 4u * WG) {
        let v = load4(how & 7u, at0 + w);
        page[w] = v.x;
        page[w + WG] = v.y;
        page[w + 2u * WG] = v.z;
        page[w + 3u * WG] = v.w;
    }
    workgroupBarrier();
    var c = 0u;
    for (var w = t * PER; w < (t + 1u) * PER; w = w + 1u) {
        c = c ^ page[w];
        for (var k = 0u; k < 32u; k = k + 1u) {
            c = (c >> 1u) ^ (CRC_POLY & (0u - (c & 1u)));
        }
    }
    var part = crcShift(c, PS - 4u * PER * (t + 1u));
    if (t == 0u) { part = part ^ crcShift(0xffffffffu, PS); }
    atomicXor(&crcAcc, part);
    workgroupBarrier();
    let ok = (how & 0x100u) == 0u || ~atomicLoad(&crcAcc) == desc[4u * i + 3u];
    if (ok) {
        let out0 = desc[4u * i + 2u];
        for (var w = t; w < PAGE_WORDS; w = w + WG) {
            dst[out0 + w] = page[w];
        }
    }
    if (t == 0u) {
        desc[4u * params.n + i] = select(0u, 1u, ok);
    }
}
