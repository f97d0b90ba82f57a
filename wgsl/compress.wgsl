// Page classification and LZ4 block compression, one 4 KiB page per
// workgroup of 128 invocations, every phase parallel:
//  1. load + zero / same-filled test;
//  2. a match for every position (hash table of the two latest earlier
//     positions + the 16 positions before it; the longest, capped at CAP);
//  3. the greedy parse (lazy by one byte) without a serial walk: each
//     invocation owns a 32-position segment, computes where the parse
//     leaves it from every entry point, the entries are chained, then every
//     segment marks its own path;
//  4. consecutive CAP-long chunks of one offset merge into one match;
//     prefix sums give every sequence its output offset, every invocation
//     writes its sequences' headers and its segment's literals;
//  5. the block is appended to the packed output (atomic bump offset).
// Output per page (info[4*i..]): class (1 zero, 2 same, 3 lz4, 5 raw),
// size, then the fill word (zero / same) or the packed byte offset (lz4).
// End-of-block rules kept: the last match starts at least 12 bytes before
// the end, the last 5 bytes are literals. Subgroup and workgroup-memory
// scans give identical bytes (integer sums).
SG_ENABLE_V

struct Params {
    n: u32,          // pages in the batch
    threshold: u32,  // a block larger than this is stored raw
    pad0: u32,
    pad1: u32,
}

@group(0) @binding(0) var<storage, read> pages: array<u32>;
@group(0) @binding(1) var<storage, read_write> packed: array<u32>;
@group(0) @binding(2) var<storage, read_write> info: array<u32>;
@group(0) @binding(3) var<uniform> params: Params;
@group(0) @binding(4) var<storage, read_write> total: array<atomic<u32>>;

const PAGE_WORDS: u32 = 1024u;
const PS: u32 = 4096u;
const WG: u32 = 128u;              // one invocation per 32-position segment
const HASH_BITS: u32 = HASH_BITS_V;
const HSIZE: u32 = 1u << HASH_BITS;
const MFLIMIT: u32 = PS - 12u;     // last position a match may start at
const MATCH_END: u32 = PS - 5u;    // a match must end by here
const BACKSCAN: u32 = 16u;         // in-round positions compared directly
const CAP: u32 = 19u;              // match lengths compared up to this
const ROUNDS: u32 = (MFLIMIT + WG) / WG;
const NSEQ: u32 = 1024u;           // sequences of a 4 KiB block, at most
// Scratch: hash tables, then segment exits (u16), then sequences + block.
const A_WORDS: u32 = max(2u * HSIZE, 3u * NSEQ);
const SEQ_B: u32 = NSEQ;           // per sequence: literal output - anchor
const OUT: u32 = 2u * NSEQ;        // the block being built

var<workgroup> page: array<u32, PAGE_WORDS + 1u>;   // + a zero word
var<workgroup> mt: array<atomic<u32>, PS / 2u>;     // u16: (len-4)<<12 | off
var<workgroup> A: array<atomic<u32>, A_WORDS>;
var<workgroup> selw: array<u32, WG>;   // positions where a match is taken
var<workgroup> pmw: array<u32, WG>;    // path positions that start a match
var<workgroup> endw: array<u32, WG>;   // path literals + sequence starts
var<workgroup> entry: array<u32, WG + 1u>;
var<workgroup> scanBuf: array<u32, WG>;
var<workgroup> bcast: u32;
var<workgroup> flag: atomic<u32>;

fn byteAt(i: u32) -> u32 {
    return (page[i >> 2u] >> ((i & 3u) * 8u)) & 0xffu;
}

// Four bytes at any byte position i <= PS-4 (little endian).
fn load32(i: u32) -> u32 {
    let w = i >> 2u;
    let s = (i & 3u) * 8u;
    if (s == 0u) {
        return page[w];
    }
    return (page[w] >> s) | (page[w + 1u] << (32u - s));
}

fn hashOf(k: u32) -> u32 {
    return (k * 2654435761u) >> (32u - HASH_BITS);
}

fn mtAt(p: u32) -> u32 {
    return (atomicLoad(&mt[p >> 1u]) >> ((p & 1u) * 16u)) & 0xffffu;
}

// Match length taken at p (0: none); positions past MFLIMIT have none.
fn lenAt(p: u32) -> u32 {
    if (p > MFLIMIT) { return 0u; }
    let e = mtAt(p);
    if (e == 0u) { return 0u; }
    return (e >> 12u) + 4u;
}

// Match length of candidate c for position p (key already equal), capped.
fn extend(p: u32, c: u32, lim: u32) -> u32 {
    var l = 4u;
    loop {
        if (l >= lim) { break; }
        let x = load32(p + l) ^ load32(c + l);
        if (x != 0u) {
            l = l + (countTrailingZeros(x) >> 3u);
            break;
        }
        l = l + 4u;
    }
    return min(l, lim);
}

fn extra(n: u32) -> u32 {
    if (n < 15u) { return 0u; }
    return (n - 15u) / 255u + 1u;
}

fn putByte(o: u32, b: u32) {
    atomicOr(&A[OUT + (o >> 2u)], b << ((o & 3u) * 8u));
}

// Extra length bytes of n (>= 15) at o; returns the position after them.
fn putLen(o0: u32, n: u32) -> u32 {
    var o = o0;
    var r = n - 15u;
    loop {
        if (r < 255u) { break; }
        putByte(o, 255u);
        o = o + 1u;
        r = r - 255u;
    }
    putByte(o, r);
    return o + 1u;
}

// Exclusive prefix sum over the invocations (in index order) and total.
// Must be called from uniform control flow.
fn scanWG(t: u32, v: u32) -> vec2<u32> {
    scanBuf[t] = v;
    workgroupBarrier();
    for (var d = 1u; d < WG; d = d * 2u) {
        var x = 0u;
        if (t >= d) { x = scanBuf[t - d]; }
        workgroupBarrier();
        scanBuf[t] = scanBuf[t] + x;
        workgroupBarrier();
    }
    let r = vec2<u32>(scanBuf[t] - v, scanBuf[WG - 1u]);
    workgroupBarrier();
    return r;
}

// Private copies of the subgroup builtins, for scanSG.
var<private> sgId: u32;
var<private> sgSz: u32;

SG_SCAN_V

@compute @workgroup_size(WG)
fn compress(@builtin(workgroup_id) wid: vec3<u32>,
            @builtin(num_workgroups) nwg: vec3<u32>,
            @builtin(local_invocation_index) t: u32 SG_PARAMS_V) {
    let pageIdx = wid.y * nwg.x + wid.x;
    if (pageIdx >= params.n) {
        return; // uniform: depends on the workgroup only
    }
    let base = pageIdx * PAGE_WORDS;
    let f0 = pages[base];
    let f1 = pages[base + 1u];

    // Load the page and test every 8-byte word against the first.
    var differ = false;
    for (var i = t; i < PAGE_WORDS / 2u; i = i + WG) {
        let a = pages[base + 2u * i];
        let b = pages[base + 2u * i + 1u];
        page[2u * i] = a;
        page[2u * i + 1u] = b;
        if (a != f0 || b != f1) {
            differ = true;
        }
    }
    if (differ) { atomicOr(&flag, 1u); }
    SG_CHECK_V
    workgroupBarrier();
    if (t == 0u) {
        bcast = atomicLoad(&flag);
    }
    let fl = workgroupUniformLoad(&bcast);
    if ((fl & 1u) == 0u) {
        if (t == 0u) {
            if (f0 == 0u && f1 == 0u) {
                info[4u * pageIdx] = 1u;
                info[4u * pageIdx + 1u] = 0u;
            } else {
                info[4u * pageIdx] = 2u;
                info[4u * pageIdx + 1u] = 8u;
            }
            info[4u * pageIdx + 2u] = f0;
            info[4u * pageIdx + 3u] = f1;
        }
        return;
    }
    let useSG = (fl & 2u) == 0u;

    // 2. Matches. In round r invocation t takes position r*WG+t; the
    // tables hold the latest two positions per hash of earlier rounds.
    for (var r = 0u; r < ROUNDS; r = r + 1u) {
        let p = r * WG + t;
        var h = 0u;
        var old1 = 0u;
        if (p <= MFLIMIT) {
            let key = load32(p);
            h = hashOf(key);
            let lim = min(CAP, MATCH_END - p);
            var best = 0u;
            var boff = 0u;
            let lo = max(r * WG, max(p, BACKSCAN) - BACKSCAN);
            for (var j = p; j > lo; j = j - 1u) {
                if (load32(j - 1u) == key) {
                    best = extend(p, j - 1u, lim);
                    boff = p - (j - 1u);
                    break;
                }
            }
            old1 = atomicLoad(&A[h]);
            let old2 = atomicLoad(&A[HSIZE + h]);
            if (best < lim && old1 != 0u && load32(old1 - 1u) == key) {
                let l = extend(p, old1 - 1u, lim);
                if (l > best) { best = l; boff = p - (old1 - 1u); }
            }
            if (best < lim && old2 != 0u && load32(old2 - 1u) == key) {
                let l = extend(p, old2 - 1u, lim);
                if (l > best) { best = l; boff = p - (old2 - 1u); }
            }
            if (best >= 4u) {
                atomicOr(&mt[p >> 1u], (((best - 4u) << 12u) | boff) << (16u * (p & 1u)));
            }
        }
        workgroupBarrier();
        if (p <= MFLIMIT) { atomicMax(&A[h], p + 1u); }
        workgroupBarrier();
        if (p <= MFLIMIT && atomicLoad(&A[h]) == p + 1u) {
            atomicStore(&A[HSIZE + h], old1);
        }
        workgroupBarrier();
    }

    // 3. Parse. Segment [s0, s0+32): where a match is taken (lazy: not
    // when the next position's is longer), then for every entry point e
    // the first path position at or past the segment's end.
    let s0 = t * 32u;
    let s1 = s0 + 32u;
    var sel = 0u;
    var ex: array<u32, 32>;
    var lnext = lenAt(s1);
    for (var k = 31i; k >= 0i; k = k - 1i) {
        let e = s0 + u32(k);
        let l = lenAt(e);
        var nx = e + 1u;
        if (l >= 4u && lnext <= l) {
            sel = sel | (1u << u32(k));
            nx = e + l;
        }
        if (nx >= s1) {
            ex[k] = nx;
        } else {
            ex[k] = ex[nx - s0];
        }
        lnext = l;
    }
    selw[t] = sel;
    workgroupBarrier(); // the tables are dead from here
    for (var k = 0u; k < 16u; k = k + 1u) {
        atomicStore(&A[t * 16u + k], ex[2u * k] | (ex[2u * k + 1u] << 16u));
    }
    for (var w = t; w < NSEQ; w = w + WG) {
        atomicStore(&A[OUT + w], 0u);
    }
    workgroupBarrier();
    // Chain the segments: entry[s] is the first path position >= s*32.
    if (t == 0u) {
        var pos = 0u;
        for (var s = 0u; s < WG; s = s + 1u) {
            entry[s] = pos;
            if (pos < s * 32u + 32u) {
                pos = (atomicLoad(&A[pos >> 1u]) >> ((pos & 1u) * 16u)) & 0xffffu;
            }
        }
        entry[WG] = pos;
    }
    workgroupBarrier();
    // Every segment marks its own path: match starts and literals.
    var pm = 0u;
    var lit = 0u;
    var pos = entry[t];
    loop {
        if (pos >= s1) { break; }
        let k = pos - s0;
        if ((sel & (1u << k)) != 0u) {
            pm = pm | (1u << k);
            pos = pos + lenAt(pos);
        } else {
            lit = lit | (1u << k);
            pos = pos + 1u;
        }
    }
    pmw[t] = pm;
    workgroupBarrier();

    // 4. Sequences: a path match continuing a CAP-long one of the same
    // offset right before it is part of that match.
    var ss = 0u;
    var bits = pm;
    loop {
        if (bits == 0u) { break; }
        let k = countTrailingZeros(bits);
        bits = bits & (bits - 1u);
        let q = s0 + k;
        var cont = false;
        if (q >= CAP) {
            let p = q - CAP;
            if ((pmw[p >> 5u] & (1u << (p & 31u))) != 0u && lenAt(p) == CAP &&
                ((mtAt(p) ^ mtAt(q)) & 0xfffu) == 0u) {
                cont = true;
            }
        }
        if (!cont) { ss = ss | (1u << k); }
    }
    endw[t] = lit | ss;
    var sc: vec2<u32>;
    if (useSG) {
        sc = SG_CALL_V(t, countOneBits(ss));
    } else {
        sc = scanWG(t, countOneBits(ss));
    }
    let nseq = sc.y;
    // Starts, in order.
    bits = ss;
    var si = sc.x;
    loop {
        if (bits == 0u) { break; }
        atomicStore(&A[si], s0 + countTrailingZeros(bits));
        bits = bits & (bits - 1u);
        si = si + 1u;
    }
    workgroupBarrier();
    // Ends: the next path literal or sequence start.
    for (var i = t; i < nseq; i = i + WG) {
        let q = atomicLoad(&A[i]);
        var w = q >> 5u;
        var b = endw[w] & ~((2u << (q & 31u)) - 1u);
        loop {
            if (b != 0u || w + 1u >= WG) { break; }
            w = w + 1u;
            b = endw[w];
        }
        var e = PS;
        if (b != 0u) { e = w * 32u + countTrailingZeros(b); }
        atomicStore(&A[i], q | (e << 16u));
    }
    workgroupBarrier();
    // Sizes: invocation t takes sequences [t*per, t*per+per); sequence
    // nseq is the closing literals-only one.
    let per = (nseq + WG) / WG;
    let i0 = min(t * per, nseq + 1u);
    let i1 = min(i0 + per, nseq + 1u);
    var sum = 0u;
    var anchor = 0u;
    if (i0 > 0u && i0 <= nseq) { anchor = atomicLoad(&A[i0 - 1u]) >> 16u; }
    var a = anchor;
    for (var i = i0; i < i1; i = i + 1u) {
        if (i < nseq) {
            let s = atomicLoad(&A[i]);
            let st = s & 0xffffu;
            let en = s >> 16u;
            let ll = st - a;
            sum = sum + 3u + extra(ll) + ll + extra(en - st - 4u);
            a = en;
        } else {
            let ll = PS - a;
            sum = sum + 1u + extra(ll) + ll;
        }
    }
    var so: vec2<u32>;
    if (useSG) {
        so = SG_CALL_V(t, sum);
    } else {
        so = scanWG(t, sum);
    }
    if (t == 0u) { bcast = so.y; }
    let size = workgroupUniformLoad(&bcast);
    let limit = min(params.threshold, PS);
    if (size > limit) { // uniform: a workgroup-wide total
        if (t == 0u) {
            info[4u * pageIdx] = 5u;
            info[4u * pageIdx + 1u] = PS;
            info[4u * pageIdx + 2u] = 0u;
            info[4u * pageIdx + 3u] = 0u;
        }
        return;
    }
    // Headers; literal bases for the segments.
    var o = so.x;
    a = anchor;
    for (var i = i0; i < i1; i = i + 1u) {
        var st = PS;
        var en = PS;
        if (i < nseq) {
            let s = atomicLoad(&A[i]);
            st = s & 0xffffu;
            en = s >> 16u;
        }
        let ll = st - a;
        var ml = 0u;
        if (i < nseq) { ml = en - st - 4u; }
        putByte(o, (min(ll, 15u) << 4u) | min(ml, 15u));
        o = o + 1u;
        if (ll >= 15u) { o = putLen(o, ll); }
        atomicStore(&A[SEQ_B + i], o - a); // wraps: added to a position
        o = o + ll;
        if (i < nseq) {
            let off = mtAt(st) & 0xfffu;
            putByte(o, off & 0xffu);
            putByte(o + 1u, off >> 8u);
            o = o + 2u;
            if (ml >= 15u) { o = putLen(o, ml); }
        }
        a = en;
    }
    workgroupBarrier();
    // Literals of this segment: sequence index = starts before them.
    bits = lit;
    loop {
        if (bits == 0u) { break; }
        let k = countTrailingZeros(bits);
        bits = bits & (bits - 1u);
        let i = sc.x + countOneBits(ss & ((1u << k) - 1u));
        putByte(s0 + k + atomicLoad(&A[SEQ_B + i]), byteAt(s0 + k));
    }
    workgroupBarrier();

    // 5. Append the block to the packed output.
    if (t == 0u) {
        bcast = atomicAdd(&total[0], (size + 3u) & ~3u);
    }
    let goff = workgroupUniformLoad(&bcast);
    let words = (size + 3u) / 4u;
    for (var w = t; w < words; w = w + WG) {
        packed[(goff >> 2u) + w] = atomicLoad(&A[OUT + w]);
    }
    if (t == 0u) {
        info[4u * pageIdx] = 3u;
        info[4u * pageIdx + 1u] = size;
        info[4u * pageIdx + 2u] = goff;
        info[4u * pageIdx + 3u] = 0u;
    }
}
