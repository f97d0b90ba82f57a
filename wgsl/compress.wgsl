// Page classification and LZ4 block compression, one 4 KiB page per
// workgroup of 256 invocations, every phase parallel:
//  1. load + zero / same-filled test;
//  2. a match for every position (the latest earlier positions with the
//     same hash of 4 and of 6 bytes, and the nearest of the 32 positions
//     before it; the longest, capped at CAP);
//  3. the greedy parse (lazy by up to two bytes) without a serial walk: each
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
const WG: u32 = 256u;              // invocations: positions per round
const NSEGS: u32 = 128u;           // 32-position segments, one per invocation t < NSEGS
const HASH_BITS: u32 = HASH_BITS_V;
const HSIZE: u32 = 1u << HASH_BITS;
const MFLIMIT: u32 = PS - 12u;     // last position a match may start at
const MATCH_END: u32 = PS - 5u;    // a match must end by here
const BACKSCAN: u32 = 16u;         // in-round positions compared directly
const CAP: u32 = 19u;              // match lengths compared up to this
const OFFSET_PASSES: u32 = 3u;     // passes of the offset rule (2b)
const ROUNDS: u32 = (MFLIMIT + WG) / WG;
const NSEQ: u32 = 1024u;           // sequences of a 4 KiB block, at most
const STOP: u32 = STOP_V;          // benchmarks only: stop after this phase
const TUNE: u32 = TUNE_V;          // benchmarks only: leave out parts
// Scratch: hash tables, then segment exits (u16), then sequences + block.
const A_WORDS: u32 = max(3u * HSIZE, 3u * NSEQ);
const SEQ_B: u32 = NSEQ;           // per sequence: literal output - anchor
const OUT: u32 = 2u * NSEQ;        // the block being built

// The page at word PAD, with zero words around it: the windows read at
// its edges (8 words before, 3 after) need no bounds test.
const PAD: u32 = 8u;
var<workgroup> page: array<u32, PAGE_WORDS + PAD + 3u>;
var<workgroup> mt: array<atomic<u32>, PS / 2u>;     // u16: (len-4)<<12 | off
var<workgroup> A: array<atomic<u32>, A_WORDS>;
var<workgroup> selw: array<u32, NSEGS>;   // positions where a match is taken
var<workgroup> pmw: array<u32, NSEGS>;    // path positions that start a match
var<workgroup> endw: array<u32, NSEGS>;   // path literals + sequence starts
var<workgroup> entry: array<u32, NSEGS + 1u>;
var<workgroup> scanBuf: array<u32, WG>;
var<workgroup> bcast: u32;
var<workgroup> flag: atomic<u32>;

// The helpers (byteAt ... scanWG) are in compress_fns.wgsl, appended.

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

    // Workgroup memory that is read before it is written starts zeroed
    // here (the device may be opened without Dawn's zero-initialization).
    if (t == 0u) { atomicStore(&flag, 0u); }
    if (t < PAD) { page[t] = 0u; }
    if (t < 3u) { page[PAD + PAGE_WORDS + t] = 0u; }
    for (var i = t; i < PS / 2u; i = i + WG) { atomicStore(&mt[i], 0u); }
    for (var i = t; i < 3u * HSIZE; i = i + WG) { atomicStore(&A[i], 0u); }
    workgroupBarrier();
    // Load the page and test every 8-byte word against the first.
    var differ = false;
    for (var i = t; i < PAGE_WORDS / 2u; i = i + WG) {
        let a = pages[base + 2u * i];
        let b = pages[base + 2u * i + 1u];
        page[PAD + 2u * i] = a;
        page[PAD + 2u * i + 1u] = b;
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
    if (STOP == 1u) {
        if (t == 0u) { info[4u * pageIdx] = 5u; info[4u * pageIdx + 1u] = PS; }
        return;
    }

    // 2. Matches. In round r invocation t takes position r*WG+t; two
    // tables hold the latest position of earlier rounds per hash of 4 and
    // of 6 bytes (the second finds long matches among short repeats).
    // The words around p are read once into registers: the key, the
    // bytes a match is compared on, and the 32 positions before p.
    for (var r = 0u; r < ROUNDS; r = r + 1u) {
        let p = r * WG + t;
        let rs = r * WG;
        var h = HSIZE;  // where p goes in the 4-byte table (HSIZE: nowhere)
        var h6 = HSIZE; // and in the 6-byte one
        var prev1 = 0u;
        if (p <= MFLIMIT) {
            let a = p & 3u;
            let sh = a * 8u;
            let b0 = i32(p >> 2u) - 4;
            // Words b0-4..b0+9 in registers (no arrays: constant names).
            let q0 = pageWord(b0 - 4);
            let q1 = pageWord(b0 - 3);
            let q2 = pageWord(b0 - 2);
            let q3 = pageWord(b0 - 1);
            let w0 = pageWord(b0);
            let w1 = pageWord(b0 + 1);
            let w2 = pageWord(b0 + 2);
            let w3 = pageWord(b0 + 3);
            let w4 = pageWord(b0 + 4);
            let w5 = pageWord(b0 + 5);
            let w6 = pageWord(b0 + 6);
            let w7 = pageWord(b0 + 7);
            let w8 = pageWord(b0 + 8);
            let w9 = pageWord(b0 + 9);
            let key = fsh(w4, w5, sh);
            // The 4 bytes at p+4, p+8, p+12, p+16.
            let v = vec4<u32>(fsh(w5, w6, sh), fsh(w6, w7, sh), fsh(w7, w8, sh), fsh(w8, w9, sh));
            let lim = min(CAP, MATCH_END - p);
            let key6 = v.x & 0xffffu; // bytes 4 and 5 after p
            // Insert p unless a later position of this round has the same
            // key (runs would otherwise all hit one table entry at once).
            // k1, k2: the 4 bytes at p+1, p+2; j1, j2: the 2 bytes after
            // (all within the key and v.x, the 8 bytes at p).
            let k1 = (key >> 8u) | (v.x << 24u);
            let k2 = (key >> 16u) | (v.x << 16u);
            let j1 = (v.x >> 8u) & 0xffffu;
            let j2 = (v.x >> 16u) & 0xffffu;
            let end = min(MFLIMIT + 1u, rs + WG);
            let e1 = p + 1u < end;
            let e2 = p + 2u < end;
            let e4 = p + 4u < end;
            let e8 = p + 8u < end;
            let dup = (e1 && k1 == key) || (e2 && k2 == key) || (e4 && v.x == key) || (e8 && v.y == key);
            let dup6 = (e1 && k1 == key && j1 == key6) || (e2 && k2 == key && j2 == key6) ||
                       (e4 && v.x == key && (v.y & 0xffffu) == key6) || (e8 && v.y == key && (v.z & 0xffffu) == key6);
            if ((TUNE & 2u) == 0u) {
                h = select(hashOf(key), HSIZE, dup);
                h6 = select(hash6(key, key6), HSIZE, dup6);
            }
            var best = 0u;
            var boff = 0u;
            // Nearest of the 32 positions before p (this round) with the
            // same key: byte rel of the window starts at (p & ~3) - 32 + rel.
            var brel = 99u;
            if ((TUNE & 1u) == 0u) {
                brel = bscanMask(p, rs, a, key, q0, q1, q2, q3, w0, w1, w2, w3, w4, w5);
            }
            let old1 = atomicLoad(&A[hashOf(key)]);
            let old2 = atomicLoad(&A[HSIZE + hash6(key, key6)]);
            let old3 = atomicLoad(&A[2u * HSIZE + hashOf(key)]);
            prev1 = old1;
            // All four lengths at once, their loads side by side (not a
            // chain of dependent ones); preferred in this order, so the
            // bytes are those of comparing one after the other.
            let c0 = select(0u, (p & ~3u) + brel - 32u, brel != 99u);
            let l0 = select(0u, candLen(c0, key, v, lim), brel != 99u);
            var l1 = select(0u, candLen(max(old1, 1u) - 1u, key, v, lim), old1 != 0u);
            var l2 = select(0u, candLen(max(old2, 1u) - 1u, key, v, lim), old2 != 0u);
            var l3 = select(0u, candLen(max(old3, 1u) - 1u, key, v, lim), old3 != 0u);
            if ((TUNE & 16u) != 0u) { l3 = 0u; } // benchmarks: no displaced entry
            if ((TUNE & 32u) != 0u) { l2 = 0u; } // benchmarks: no 6-byte table
            if ((TUNE & 64u) != 0u) { // benchmarks: no table candidates
                l1 = 0u;
                l2 = 0u;
                l3 = 0u;
                prev1 = 0u;
            }
            best = l0;
            boff = p - c0;
            if (l1 > best) { best = l1; boff = p + 1u - old1; }
            if (l2 > best) { best = l2; boff = p + 1u - old2; }
            if (l3 > best) { best = l3; boff = p + 1u - old3; }
            if (best >= 4u) {
                atomicOr(&mt[p >> 1u], (((best - 4u) << 12u) | boff) << (16u * (p & 1u)));
            }
        }
        workgroupBarrier();
        if (h < HSIZE) { atomicMax(&A[h], p + 1u); }
        if (h6 < HSIZE) { atomicMax(&A[HSIZE + h6], p + 1u); }
        workgroupBarrier();
        // The entry p displaced stays as a second candidate.
        if (h < HSIZE && atomicLoad(&A[h]) == p + 1u && prev1 != 0u) {
            atomicStore(&A[2u * HSIZE + h], prev1);
        }
        workgroupBarrier();
    }

    // 2b. Long matches are found in CAP-long chunks; a chunk following a
    // CAP-long one merges with it when both use one offset (phase 4). So
    // where position q could match at the offset of the CAP-long match at
    // q-CAP at least as long as at its own, it takes that offset. A pass
    // finds all its new entries, then writes them (two barriers a pass):
    // each pass carries an offset one chunk further.
    for (var it = 0u; it < select(OFFSET_PASSES, 0u, (TUNE & 8u) != 0u); it = it + 1u) {
        var nvs: array<u32, PS / WG>;
        for (var k = 0u; k < PS / WG; k = k + 1u) {
            nvs[k] = offsetFor(k * WG + t);
        }
        workgroupBarrier();
        for (var k = 0u; k < PS / WG; k = k + 1u) {
            let q = k * WG + t;
            let nv = nvs[k];
            if (nv != 0u) {
                atomicAnd(&mt[q >> 1u], ~(0xffffu << (16u * (q & 1u))));
                atomicOr(&mt[q >> 1u], nv << (16u * (q & 1u)));
            }
        }
        workgroupBarrier();
    }
    if (STOP == 2u) {
        if (t == 0u) { info[4u * pageIdx] = 5u; info[4u * pageIdx + 1u] = PS; }
        return;
    }
    // 3. Parse. Segment [s0, s0+32): where a match is taken (lazy: not
    // when one of the next two positions' is longer), then for every entry point e
    // the first path position at or past the segment's end.
    let seg = t < NSEGS;
    let s0 = min(t, NSEGS) * 32u;
    let s1 = s0 + 32u;
    // The exits (u16) go where the tables were: no one reads those after
    // the last barrier of the rounds. Each segment owns 16 words.
    var sel = 0u;
    var lnext = lenAt(s1);
    var lnext2 = lenAt(s1 + 1u);
    for (var k = select(-1i, 31i, seg); k >= 0i; k = k - 1i) {
        let e = s0 + u32(k);
        let l = lenAt(e);
        var nx = e + 1u;
        if (l >= 4u && lnext <= l && lnext2 <= l) {
            sel = sel | (1u << u32(k));
            nx = e + l;
        }
        var x = nx;
        if (nx < s1) {
            x = (atomicLoad(&A[nx >> 1u]) >> ((nx & 1u) * 16u)) & 0xffffu;
        }
        if ((e & 1u) == 1u) {
            atomicStore(&A[e >> 1u], x << 16u); // odd first: k goes down
        } else {
            atomicStore(&A[e >> 1u], atomicLoad(&A[e >> 1u]) | x);
        }
        lnext2 = lnext;
        lnext = l;
    }
    if (seg) { selw[t] = sel; }
    workgroupBarrier();
    for (var w = t; w < NSEQ; w = w + WG) {
        atomicStore(&A[OUT + w], 0u);
    }
    workgroupBarrier();
    // Chain the segments: entry[s] is the first path position >= s*32.
    if (t == 0u) {
        var pos = 0u;
        for (var s = 0u; s < NSEGS; s = s + 1u) {
            entry[s] = pos;
            if (pos < s * 32u + 32u) {
                pos = (atomicLoad(&A[pos >> 1u]) >> ((pos & 1u) * 16u)) & 0xffffu;
            }
        }
        entry[NSEGS] = pos;
    }
    workgroupBarrier();
    // Every segment marks its own path: match starts and literals.
    var pm = 0u;
    var lit = 0u;
    var pos = s1;
    if (seg) { pos = entry[t]; }
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
    if (seg) { pmw[t] = pm; }
    workgroupBarrier();
    if (STOP == 3u) {
        if (t == 0u) { info[4u * pageIdx] = 5u; info[4u * pageIdx + 1u] = PS; }
        return;
    }

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
    if (seg) { endw[t] = lit | ss; }
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
            if (b != 0u || w + 1u >= NSEGS) { break; }
            w = w + 1u;
            b = endw[w];
        }
        var e = PS;
        if (b != 0u) { e = w * 32u + countTrailingZeros(b); }
        atomicStore(&A[i], q | (e << 16u));
    }
    workgroupBarrier();
    if (STOP == 4u) {
        if (t == 0u) { info[4u * pageIdx] = 5u; info[4u * pageIdx + 1u] = PS; }
        return;
    }
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
