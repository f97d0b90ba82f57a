// LZ4 block decompression, one page per workgroup. One invocation decodes
// into workgroup memory with every read and write bounds-checked (a damaged
// block sets status 0, never faults); then the workgroup copies the page out.
// desc[2*i] is the block's byte offset in src (4-byte aligned), desc[2*i+1]
// its length; status[i] is 1 when the block decoded to exactly one page.

struct Params {
    n: u32,
    pad0: u32,
    pad1: u32,
    pad2: u32,
}

@group(0) @binding(0) var<storage, read> src: array<u32>;
@group(0) @binding(1) var<storage, read> desc: array<u32>;
@group(0) @binding(2) var<storage, read_write> dst: array<u32>;
@group(0) @binding(3) var<storage, read_write> status: array<u32>;
@group(0) @binding(4) var<uniform> params: Params;

const PAGE_WORDS: u32 = PAGE_WORDS_V;
const PS: u32 = PAGE_WORDS * 4u;
const WG: u32 = 64u;

var<workgroup> page: array<u32, PAGE_WORDS>;

var<private> srcBase: u32;

fn inByte(i: u32) -> u32 {
    let b = srcBase + i;
    return (src[b >> 2u] >> ((b & 3u) * 8u)) & 0xffu;
}

fn outByte(i: u32) -> u32 {
    return (page[i >> 2u] >> ((i & 3u) * 8u)) & 0xffu;
}

fn setByte(i: u32, v: u32) {
    let s = (i & 3u) * 8u;
    page[i >> 2u] = (page[i >> 2u] & ~(0xffu << s)) | (v << s);
}

// decode returns true when the block expands to exactly PS bytes.
fn decode(len: u32) -> bool {
    var ip = 0u;
    var op = 0u;
    loop {
        if (ip >= len) { return false; }
        let token = inByte(ip);
        ip = ip + 1u;
        var lit = token >> 4u;
        if (lit == 15u) {
            loop {
                if (ip >= len) { return false; }
                let b = inByte(ip);
                ip = ip + 1u;
                lit = lit + b;
                if (b != 255u || lit > PS) { break; }
            }
        }
        if (lit > len - ip || lit > PS - op) { return false; }
        for (var k = 0u; k < lit; k = k + 1u) {
            setByte(op + k, inByte(ip + k));
        }
        ip = ip + lit;
        op = op + lit;
        if (ip == len) { break; }
        if (len - ip < 2u) { return false; }
        let off = inByte(ip) | (inByte(ip + 1u) << 8u);
        ip = ip + 2u;
        if (off == 0u || off > op) { return false; }
        var ml = token & 15u;
        if (ml == 15u) {
            loop {
                if (ip >= len) { return false; }
                let b = inByte(ip);
                ip = ip + 1u;
                ml = ml + b;
                if (b != 255u || ml > PS) { break; }
            }
        }
        ml = ml + 4u;
        if (ml > PS - op) { return false; }
        for (var k = 0u; k < ml; k = k + 1u) {
            setByte(op + k, outByte(op - off + k));
        }
        op = op + ml;
    }
    return op == PS;
}

@compute @workgroup_size(WG)
fn decompress(@builtin(workgroup_id) wid: vec3<u32>,
              @builtin(num_workgroups) nwg: vec3<u32>,
              @builtin(local_invocation_index) t: u32) {
    let i = wid.y * nwg.x + wid.x;
    if (i >= params.n) {
        return;
    }
    if (t == 0u) {
        srcBase = desc[2u * i];
        var ok = 0u;
        if (decode(desc[2u * i + 1u])) { ok = 1u; }
        status[i] = ok;
    }
    workgroupBarrier();
    for (var w = t; w < PAGE_WORDS; w = w + WG) {
        dst[i * PAGE_WORDS + w] = page[w];
    }
}
