// Page classification and LZ4 block compression, one 4 KiB page per
// workgroup of 128 invocations. The algorithm is backends/pagelz4's (the
// reference the CUDA kernel follows too), so every block is byte for byte
// the one pagelz4 writes:
//  1. load + zero / same-filled test (zram's rule);
//  2. hash chains: each position linked to the nearest earlier one with
//     the same 4-byte hash, in 32 rounds of 128 positions (the nearest in
//     the round found from a per-bucket bitmask of the round's positions);
//  3. the best match of every position, in parallel: up to DEPTH chain
//     candidates, lengths compared up to CAP bytes;
//  4. the match starts (a match not beaten by the next position's) as a
//     bitmap, then one invocation walks it from start to start, extending
//     CAP-long matches, and lists the sequences;
//  5. a prefix sum gives every sequence its output offset; headers are
//     written per sequence, literals per position; the block is appended
//     to the packed output (atomic bump offset).
// It is small on purpose: about 25 KiB of workgroup memory and few live
// registers, so that many pages share an SM (its throughput is residency).
// Output per page (info[4*i..]): class (1 zero, 2 same, 3 lz4, 5 raw),
// size, then the fill word (zero / same) or the packed byte offset (lz4).
// Subgroup and workgroup-memory scans give identical bytes (integer sums).
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
const WG: u32 = 128u;              // invocations: positions per chain round
const HASH_BITS: u32 = 11u;        // pagelz4.HashBits
const HSIZE: u32 = 1u << HASH_BITS;
const DEPTH: u32 = select(6u, TUNE_V, TUNE_V != 0u); // pagelz4.ChainDepth (TUNE: benchmarks)
const CAP: u32 = 19u;              // pagelz4.SelectCap
const LAST: u32 = PS - 12u;        // the last position a match may start at
const MATCH_END: u32 = PS - 5u;    // a match must end by here
const NB: u32 = 128u;              // buckets of a round's bitmask table
const STOP: u32 = STOP_V;          // benchmarks only: stop after this phase

// Scratch S (words), regions reused once their phase is over:
const S_LINK: u32 = 0u;            // u16 per position: chain link (q+1; 0 none)
const S_SEQ: u32 = 0u;             //   then start | end<<16 per sequence
const S_LB: u32 = 1024u;           //   and its offset, then its literal base
const S_HEAD: u32 = 2048u;         // latest position+1 per hash
const S_E: u32 = 2048u;            //   then u16 per position: (len-4)<<12 | off
const S_OUT: u32 = 2048u;          //   then the block being built
const S_MASK: u32 = 4096u;         // two bitmask tables (NB buckets x 4 words)
const S_SEL: u32 = 4096u;          //   then one bit per position: a match starts
const S_WORDS: u32 = 5120u;

// The page at word PAD, with zero words around it: the windows read near
// its end need no bounds test.
const PAD: u32 = 8u;
var<workgroup> page: array<u32, PAGE_WORDS + PAD + 8u>;
var<workgroup> S: array<atomic<u32>, S_WORDS>;
var<workgroup> rh: array<u32, WG>;   // the round's hashes
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
    // here (the device may be opened without Dawn's zero-initialization):
    // links, heads and bitmasks.
    if (t == 0u) { atomicStore(&flag, 0u); }
    if (t < PAD) { page[t] = 0u; page[PAD + PAGE_WORDS + t] = 0u; }
    for (var i = t; i < S_WORDS; i = i + WG) { atomicStore(&S[i], 0u); }
    // 1. Load the page and test every 8-byte word against the first.
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
    if (STOP == 1u) { storeRaw(pageIdx, t); return; }

    // 2. Chains. Round r holds positions r*WG + t. Each sets its bit in
    // its hash bucket's 128-bit mask; the nearest lower bit whose position
    // has the same hash is its link, else the latest position of earlier
    // rounds (head). Two mask tables alternate, so a table is cleared a
    // round before it is used again.
    for (var r = 0u; r < PS / WG; r = r + 1u) {
        let p = r * WG + t;
        let valid = p + 4u <= PS;
        var h = 0u;
        var bw = 0u;
        if (valid) {
            h = hashOf(load32(p));
            rh[t] = h;
            bw = S_MASK + (r & 1u) * NB * 4u + (h & (NB - 1u)) * 4u;
            atomicOr(&S[bw + (t >> 5u)], 1u << (t & 31u));
        }
        workgroupBarrier();
        if (valid) {
            var link = atomicLoad(&S[S_HEAD + h]);
            var w = t >> 5u;
            var m = atomicLoad(&S[bw + w]) & ((1u << (t & 31u)) - 1u);
            loop {
                if (m != 0u) {
                    let b = firstLeadingBit(m);
                    let q = w * 32u + b;
                    if (rh[q] == h) {
                        link = r * WG + q + 1u;
                        break;
                    }
                    m = m ^ (1u << b);
                    continue;
                }
                if (w == 0u) { break; }
                w = w - 1u;
                m = atomicLoad(&S[bw + w]);
            }
            atomicOr(&S[S_LINK + (p >> 1u)], link << ((p & 1u) * 16u));
        }
        workgroupBarrier();
        if (valid) {
            atomicMax(&S[S_HEAD + h], p + 1u);
            atomicStore(&S[bw + (t >> 5u)], 0u);
        }
    }
    workgroupBarrier();
    if (STOP == 2u) { storeRaw(pageIdx, t); return; }

    // 3. Best match of every position; invocation t takes the pairs
    // 2t, 2t+1 of each 256 positions and stores them as one word (the
    // heads are dead: their region holds the matches now).
    for (var k = 0u; k < PS / 256u; k = k + 1u) {
        let p = k * 256u + 2u * t;
        atomicStore(&S[S_E + k * WG + t], bestAt(p) | (bestAt(p + 1u) << 16u));
    }
    workgroupBarrier();
    if (STOP == 3u) { storeRaw(pageIdx, t); return; }

    // 4. Match starts, 32 positions per invocation (the masks are dead).
    {
        let p0 = 32u * t;
        var bits = 0u;
        var b = lenAt(p0);
        for (var j = 0u; j < 32u; j = j + 1u) {
            let b1 = lenAt(p0 + j + 1u);
            if (b >= 4u && b1 <= b) { bits = bits | (1u << j); }
            b = b1;
        }
        atomicStore(&S[S_SEL + t], bits);
    }
    workgroupBarrier();
    // The parse: from the cursor, the next start takes its match; a
    // CAP-long one is extended in full. The links are dead: the sequences
    // go there.
    if (t == 0u) {
        var cur = 0u;
        var n = 0u;
        var wi = 0u;
        loop {
            if (cur > LAST) { break; }
            wi = cur >> 5u;
            var bits = atomicLoad(&S[S_SEL + wi]) & (0xffffffffu << (cur & 31u));
            loop {
                if (bits != 0u || wi >= PS / 32u - 1u) { break; }
                wi = wi + 1u;
                bits = atomicLoad(&S[S_SEL + wi]);
            }
            if (bits == 0u) { break; }
            let s = wi * 32u + countTrailingZeros(bits);
            let e = eAt(s);
            let off = e & 0xfffu;
            var ml = (e >> 12u) + 4u;
            if (ml == CAP) { ml = extend(s, off); }
            atomicStore(&S[S_SEQ + n], s | ((s + ml) << 16u));
            atomicStore(&S[S_LB + n], off);
            n = n + 1u;
            cur = s + ml;
        }
        bcast = n;
    }
    let nseq = workgroupUniformLoad(&bcast);
    if (STOP == 4u) { storeRaw(pageIdx, t); return; }
    // The matches are dead: the block is built where they were.
    for (var i = t; i < PS / 4u; i = i + WG) { atomicStore(&S[S_OUT + i], 0u); }

    // 5. Sizes of this invocation's run of sequences (the last one,
    // index nseq, holds the final literals only) and their prefix sum.
    let per = (nseq + WG) / WG;
    let i0 = min(t * per, nseq + 1u);
    let i1 = min(i0 + per, nseq + 1u);
    var anchor = 0u;
    if (i0 > 0u) { anchor = atomicLoad(&S[S_SEQ + i0 - 1u]) >> 16u; }
    var sum = 0u;
    var a = anchor;
    for (var i = i0; i < i1; i = i + 1u) {
        if (i < nseq) {
            let s = atomicLoad(&S[S_SEQ + i]);
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
    if (size > min(params.threshold, PS)) { // uniform: a workgroup-wide total
        storeRaw(pageIdx, t);
        return;
    }
    // Headers; each sequence's literal base (output - anchor) replaces
    // its offset.
    var o = so.x;
    a = anchor;
    for (var i = i0; i < i1; i = i + 1u) {
        var st = PS;
        var en = PS;
        if (i < nseq) {
            let s = atomicLoad(&S[S_SEQ + i]);
            st = s & 0xffffu;
            en = s >> 16u;
        }
        let ll = st - a;
        var ml = 0u;
        if (i < nseq) { ml = en - st - 4u; }
        putByte(o, (min(ll, 15u) << 4u) | min(ml, 15u));
        o = o + 1u;
        if (ll >= 15u) { o = putLen(o, ll); }
        var off = 0u;
        if (i < nseq) { off = atomicLoad(&S[S_LB + i]); }
        atomicStore(&S[S_LB + i], o - a); // wraps: added to a position
        o = o + ll;
        if (i < nseq) {
            putByte(o, off & 0xffu);
            putByte(o + 1u, off >> 8u);
            o = o + 2u;
            if (ml >= 15u) { o = putLen(o, ml); }
        }
        a = en;
    }
    workgroupBarrier();
    // Literals, 32 positions per invocation: the sequence of position x
    // is the first whose match ends after x (nseq: the final literals).
    {
        let x0 = 32u * t;
        var lo = 0u;
        var hi = nseq;
        loop {
            if (lo >= hi) { break; }
            let mid = (lo + hi) / 2u;
            if ((atomicLoad(&S[S_SEQ + mid]) >> 16u) > x0) { hi = mid; } else { lo = mid + 1u; }
        }
        var i = lo;
        var st = PS;
        var en = PS;
        if (i < nseq) {
            let s = atomicLoad(&S[S_SEQ + i]);
            st = s & 0xffffu;
            en = s >> 16u;
        }
        var lb = atomicLoad(&S[S_LB + i]);
        for (var j = 0u; j < 32u; j = j + 1u) {
            let x = x0 + j;
            if (x >= en) {
                i = i + 1u;
                st = PS;
                en = PS;
                if (i < nseq) {
                    let s = atomicLoad(&S[S_SEQ + i]);
                    st = s & 0xffffu;
                    en = s >> 16u;
                }
                lb = atomicLoad(&S[S_LB + i]);
            }
            if (x < st) { putByte(x + lb, byteAt(x)); }
        }
    }
    workgroupBarrier();

    // 6. Append the block to the packed output.
    if (t == 0u) {
        bcast = atomicAdd(&total[0], (size + 3u) & ~3u);
    }
    let goff = workgroupUniformLoad(&bcast);
    let words = (size + 3u) / 4u;
    for (var w = t; w < words; w = w + WG) {
        packed[(goff >> 2u) + w] = atomicLoad(&S[S_OUT + w]);
    }
    if (t == 0u) {
        info[4u * pageIdx] = 3u;
        info[4u * pageIdx + 1u] = size;
        info[4u * pageIdx + 2u] = goff;
        info[4u * pageIdx + 3u] = 0u;
    }
}
