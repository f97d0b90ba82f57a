// LZ4 block decompression, one page per workgroup of 64 invocations, in
// chunks of up to CH sequences: one invocation parses a chunk's sequence
// headers only (every read and length bounds-checked: a damaged block
// sets status 0, never faults) and groups its matches into waves whose
// sources are already final; then the whole workgroup copies the chunk's
// literals at once, and each wave's matches at once (overlapping matches
// read only bytes before their start: byte j of a match at op with offset
// d is byte op-d+(j mod d)). Chunks keep the workgroup memory small (4.6
// KiB), so that many workgroups fit an SM: the parse is serial, and the
// kernel's speed is how many pages are parsed at once. On an H200 the
// kernel decoded 9.1-9.2 GB/s of LZ4 pages with chunks of 128 sequences
// (6 KiB), 10.5-10.6 with 64, 11.5-11.7 with 32
// (docs/benchmarks/2026-12-03-vulkan-raw-skip.md).
// desc[2*i] is the block's byte offset in src (4-byte aligned), desc[2*i+1]
// its length; status[i] is 1 when the block decoded to exactly one page.
// Page i goes to word i*PAGE_WORDS of dst, or, with params.placed set, to
// word desc[2*n + i] (the Vulkan runtime's GET straight into a client's
// mapping, pages in their places among pages of other classes).

struct Params {
    n: u32,
    placed: u32,
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
const CH: u32 = 32u; // sequences per chunk

var<workgroup> page: array<atomic<u32>, PAGE_WORDS>;
var<workgroup> litSrc: array<u32, CH>;  // byte offset in src
var<workgroup> litAt: array<u32, CH>;   // output position | length << 16
var<workgroup> mAt: array<u32, CH>;     // offset | length << 16 (0: none)
var<workgroup> waves: array<u32, CH + 1u>; // first sequence of each wave
var<workgroup> res: vec3<u32>;          // state, sequences, waves

var<private> srcBase: u32;
// Where the parse stands between chunks (the parsing invocation's own).
var<private> ip: u32;
var<private> op: u32;

fn inByte(i: u32) -> u32 {
    let b = srcBase + i;
    return (src[b >> 2u] >> ((b & 3u) * 8u)) & 0xffu;
}

fn outByte(i: u32) -> u32 {
    return (atomicLoad(&page[(i >> 2u) & (PAGE_WORDS - 1u)]) >> ((i & 3u) * 8u)) & 0xffu;
}

fn putOut(i: u32, v: u32) {
    atomicOr(&page[(i >> 2u) & (PAGE_WORDS - 1u)], v << ((i & 3u) * 8u));
}

// parse records the next chunk of sequences of a block of len bytes and
// their waves: (state, sequences, waves), state 0 for a block that does
// not expand to exactly PS bytes, 1 when more chunks follow, 2 at its end.
fn parse(len: u32) -> vec3<u32> {
    var ns = 0u;
    var nw = 0u;
    var waveOut = PS; // first match output of the current wave
    loop {
        if (ns >= CH) {
            waves[nw] = ns;
            return vec3<u32>(1u, ns, nw);
        }
        if (ip >= len) { return vec3<u32>(0u, 0u, 0u); }
        let token = inByte(ip);
        ip = ip + 1u;
        var lit = token >> 4u;
        if (lit == 15u) {
            loop {
                if (ip >= len) { return vec3<u32>(0u, 0u, 0u); }
                let b = inByte(ip);
                ip = ip + 1u;
                lit = lit + b;
                if (b != 255u || lit > PS) { break; }
            }
        }
        if (lit > len - ip || lit > PS - op) { return vec3<u32>(0u, 0u, 0u); }
        litSrc[ns] = srcBase + ip;
        litAt[ns] = op | (lit << 16u);
        mAt[ns] = 0u;
        ip = ip + lit;
        op = op + lit;
        if (ip == len) {
            ns = ns + 1u;
            break;
        }
        if (len - ip < 2u) { return vec3<u32>(0u, 0u, 0u); }
        let off = inByte(ip) | (inByte(ip + 1u) << 8u);
        ip = ip + 2u;
        if (off == 0u || off > op) { return vec3<u32>(0u, 0u, 0u); }
        var ml = token & 15u;
        if (ml == 15u) {
            loop {
                if (ip >= len) { return vec3<u32>(0u, 0u, 0u); }
                let b = inByte(ip);
                ip = ip + 1u;
                ml = ml + b;
                if (b != 255u || ml > PS) { break; }
            }
        }
        ml = ml + 4u;
        if (ml > PS - op) { return vec3<u32>(0u, 0u, 0u); }
        // A match reading bytes an earlier match of this wave writes
        // starts a new wave (literals are all final before any match,
        // and so is everything earlier chunks wrote).
        if (nw == 0u || op - off + min(off, ml) > waveOut) {
            waves[nw] = ns;
            nw = nw + 1u;
            waveOut = op;
        }
        mAt[ns] = off | (ml << 16u);
        op = op + ml;
        ns = ns + 1u;
    }
    if (op != PS) { return vec3<u32>(0u, 0u, 0u); }
    waves[nw] = ns;
    return vec3<u32>(2u, ns, nw);
}

@compute @workgroup_size(WG)
fn decompress(@builtin(workgroup_id) wid: vec3<u32>,
              @builtin(num_workgroups) nwg: vec3<u32>,
              @builtin(local_invocation_index) t: u32) {
    let i = wid.y * nwg.x + wid.x;
    if (i >= params.n) {
        return;
    }
    // The page is built by OR-ing bytes in: it starts zeroed here (the
    // device may be opened without Dawn's zero-initialization).
    for (var w = t; w < PAGE_WORDS; w = w + WG) {
        atomicStore(&page[w], 0u);
    }
    srcBase = desc[2u * i];
    let len = desc[2u * i + 1u];
    ip = 0u;
    op = 0u;
    loop {
        if (t == 0u) {
            res = parse(len);
        }
        let r = workgroupUniformLoad(&res);
        if (r.x == 0u) {
            if (t == 0u) { status[i] = 0u; }
            return;
        }
        // The chunk's literals: every invocation walks its sequences.
        for (var s = 0u; s < r.y; s = s + 1u) {
            let at = litAt[s];
            let o = at & 0xffffu;
            let n = at >> 16u;
            let sb = litSrc[s];
            for (var j = t; j < n; j = j + WG) {
                let b = sb + j;
                putOut(o + j, (src[b >> 2u] >> ((b & 3u) * 8u)) & 0xffu);
            }
        }
        workgroupBarrier();
        // Its matches, one wave at a time.
        for (var w = 0u; w < r.z; w = w + 1u) {
            for (var s = waves[w]; s < waves[w + 1u]; s = s + 1u) {
                let m = mAt[s];
                if (m == 0u) { continue; }
                let off = m & 0xffffu;
                let n = m >> 16u;
                let at = litAt[s];
                let o = (at & 0xffffu) + (at >> 16u);
                let sb = o - off;
                if (off >= n) {
                    for (var j = t; j < n; j = j + WG) {
                        putOut(o + j, outByte(sb + j));
                    }
                } else {
                    for (var j = t; j < n; j = j + WG) {
                        putOut(o + j, outByte(sb + j % off));
                    }
                }
            }
            workgroupBarrier();
        }
        if (r.x == 2u) { break; }
    }
    if (t == 0u) { status[i] = 1u; }
    var o = i * PAGE_WORDS;
    if (params.placed != 0u) {
        o = desc[2u * params.n + i];
    }
    for (var w = t; w < PAGE_WORDS; w = w + WG) {
        dst[o + w] = atomicLoad(&page[w]);
    }
}
