// Page classification and LZ4 block compression, one 4 KiB page per
// workgroup of 128 invocations. The algorithm is backends/pagelz4's (the
// reference the CUDA kernel follows too), so every block is byte for byte
// the one pagelz4 writes:
//  1. zero / same-filled test (zram's rule); then a page with too few
//     repeated 4-byte windows to fit under the threshold is stored raw
//     without the search (step 1b: the same bytes, proven there);
//  2. hash chains: each position linked to the nearest earlier one with
//     the same 4-byte hash, in 16 rounds of 256 positions (two per
//     invocation);
//  3. the best match of every position, in parallel: up to DEPTH chain
//     candidates, lengths compared up to CAP bytes;
//  4. the match starts (a match not beaten by the next position's) as a
//     bitmap; for every position, the end of the match from the first
//     start at or after it; one invocation follows these jumps (one load a
//     match), extending CAP-long matches, and lists the anchors, from
//     which the sequences are rebuilt in parallel;
//  5. a prefix sum gives every sequence its output offset; headers are
//     written per sequence, literals per position; the block is appended
//     to the packed output (atomic bump offset).
// Residency is what bounds it: on the H100 the driver runs compute
// workgroups in about 64 KiB of workgroup memory per SM, so the kernel
// keeps under 20 KiB (three pages an SM; 28 KiB ran two). The page is
// read from the storage buffer (cached; copied for the match search), and
// each region is reused once its phase is over.
// Output per page (info[4*i..]): class (1 zero, 2 same, 3 lz4, 5 raw),
// size, then the fill word (zero / same) or the packed byte offset (lz4)
// and the CRC-32C of the stored bytes (lz4 / raw; see storedSum).
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
const WG: u32 = 128u;              // invocations
const HASH_BITS: u32 = 11u;        // pagelz4.HashBits
const TUNE: u32 = TUNE_V;          // benchmarks only: another depth, parts left out
const DEPTH: u32 = select(DEPTH_V, TUNE & 15u, (TUNE & 15u) != 0u); // chain candidates (pagelz4's: 6)
const CAP: u32 = 19u;              // pagelz4.SelectCap
const LAST: u32 = PS - 12u;        // the last position a match may start at
const MATCH_END: u32 = PS - 5u;    // a match must end by here
const RP: u32 = 2u * WG;           // positions per chain round
const NB: u32 = 256u;              // buckets of a round table
const WIN: u32 = select(8u, (TUNE >> 8u) & 15u, ((TUNE >> 8u) & 15u) != 0u); // neighbours compared directly (TUNE: benchmarks)
const NOH: u32 = 0xffffffffu;      // no hash (past the last 4-byte window)
const STOP: u32 = STOP_V;          // benchmarks only: stop after this phase
const SEQ_LB: u32 = 1024u;         // hd: sequences, then their offsets / literal bases
const SCAN: u32 = WG;              // rh: match starts, then the scan

// u16 per position: the chain link (q+1, 0 none), then in place the best
// match, (len-4)<<12 | offset; then the block being built.
var<workgroup> lk: array<atomic<u32>, PS / 2u>;
// The latest position+1 per hash; then per sequence start | end<<16 (from
// 0) and its offset, then literal base (from SEQ_LB).
var<workgroup> hd: array<u32, PS / 2u>;
// Two round tables: the latest exposed position+1 per bucket.
var<workgroup> tb: array<atomic<u32>, 2u * NB>;
// The round's hashes; then the match starts (a bit per position) and the
// scan (from SCAN).
var<workgroup> rh: array<u32, RP>;
// u16 per round position: the next exposed position+1 of its bucket.
var<workgroup> rl: array<u32, WG>;
var<workgroup> bcast: u32;
var<workgroup> flag: atomic<u32>;
var<workgroup> crcAcc: atomic<u32>; // storedSum's
var<workgroup> nhit: atomic<u32>;   // step 1b's repeated windows

// The page's first word in pages (the helpers read the page there).
var<private> pbase: u32;

// The helpers (pageWord ... scanWG) are in compress_fns.wgsl, appended.

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
    pbase = base;
    let f0 = pages[base];
    let f1 = pages[base + 1u];

    // Workgroup memory that is read before it is written starts zeroed
    // here (the device may be opened without Dawn's zero-initialization):
    // heads and round tables.
    if (t == 0u) { atomicStore(&flag, 0u); atomicStore(&crcAcc, 0u); atomicStore(&nhit, 0u); }
    for (var i = t; i < PS / 2u; i = i + WG) { hd[i] = 0u; atomicStore(&lk[i], 0u); }
    for (var i = t; i < 2u * NB; i = i + WG) { atomicStore(&tb[i], 0u); }
    // 1. Test every 8-byte word against the first.
    var differ = false;
    for (var i = t; i < PAGE_WORDS / 2u; i = i + WG) {
        if (pages[base + 2u * i] != f0 || pages[base + 2u * i + 1u] != f1) {
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

    // 1b. Pages that cannot reach the threshold skip the search. A match
    // of length L at s with offset d makes each window (4 bytes) at s ..
    // s+L-4 equal to the one d earlier, and matches do not overlap, so
    // the covered bytes are at most R + 3 per sequence, R the windows
    // equal to an earlier one; as each sequence costs at least 3 bytes
    // beside its literals, a block is at least PS + 1 - R bytes. Hits
    // of a 16-bit hash bound R from above: every window sets its bit in
    // a bitmap (lk, not yet in use), and all but the first of a hash's
    // windows find it set, in whatever order they run. So a page with
    // PS + 1 - hits above the threshold is the raw page the search would
    // store, byte for byte, and random or float data (mostly raw) costs a
    // pass over the page instead of the whole search.
    {
        var hit = 0u;
        for (var x = t; x + 4u <= PS; x = x + WG) {
            let h = (load32(x) * 2654435761u) >> 16u;
            let bit = 1u << (h & 31u);
            let old = atomicOr(&lk[h >> 5u], bit);
            if ((old & bit) != 0u) { hit = hit + 1u; }
        }
        atomicAdd(&nhit, hit);
    }
    workgroupBarrier();
    if (t == 0u) { bcast = atomicLoad(&nhit); }
    let hits = workgroupUniformLoad(&bcast);
    if (hits + min(params.threshold, PS) < PS + 1u) {
        storeRaw(pageIdx, t);
        return;
    }

    // 2. Chains. Round r holds positions r*RP + x, x = 2t and 2t+1. The
    // link of a position is the nearest lower one of the round with the
    // same hash, else the latest of earlier rounds (head). The nearest is
    // among the WIN below it, or else an "exposed" position (none of the
    // WIN above it has its hash): those go on a list per bucket (atomic
    // exchange: any order) that such positions walk for the nearest lower
    // one with their hash. Runs and short periods expose few positions, so
    // lists stay short; an exposed position with none above it on its list
    // is the last of its hash in the round and writes the head. Two tables
    // alternate, so a table is cleared a round before its next use.
    for (var r = 0u; r < PS / RP; r = r + 1u) {
        let rs = r * RP;
        let x0 = 2u * t;
        var h0 = NOH;
        var h1 = NOH;
        if (rs + x0 + 4u <= PS) { h0 = hashOf(load32(rs + x0)); }
        if (rs + x0 + 5u <= PS) { h1 = hashOf(load32(rs + x0 + 1u)); }
        rh[x0] = h0;
        rh[x0 + 1u] = h1;
        workgroupBarrier();
        let tbase = (r & 1u) * NB;
        let q0 = nearBelow(x0, h0);
        let q1 = nearBelow(x0 + 1u, h1);
        let n0 = expose(x0, h0, tbase);
        let n1 = expose(x0 + 1u, h1, tbase);
        rl[t] = (n0 & 0xffffu) | (n1 << 16u);
        let e0 = n0 != NOEXP;
        let e1 = n1 != NOEXP;
        workgroupBarrier();
        let l0 = linkOf(rs, x0, h0, q0, e0, tbase);
        let l1 = linkOf(rs, x0 + 1u, h1, q1, e1, tbase);
        atomicStore(&lk[(rs >> 1u) + t], (l0 & 0xffffu) | (l1 << 16u));
        workgroupBarrier();
        // The last of its hash writes the head; the exposed clear the table.
        if ((l0 & LASTF) != 0u) { hd[h0] = rs + x0 + 1u; }
        if ((l1 & LASTF) != 0u) { hd[h1] = rs + x0 + 2u; }
        if (e0) { atomicStore(&tb[tbase + (h0 & (NB - 1u))], 0u); }
        if (e1) { atomicStore(&tb[tbase + (h1 & (NB - 1u))], 0u); }
    }
    workgroupBarrier();
    if (STOP == 2u) { storeRaw(pageIdx, t); return; }

    // 3. The page into hd (the heads are dead), for the candidates' many
    // random reads; then the best match of every position, replacing its
    // link: invocation t
    // takes the pair 2t, 2t+1 of each 256 positions, from the top down.
    // Chains lead only to lower positions, which later rounds still read;
    // a round writes only once all of it has read.
    for (var i = t; i < PAGE_WORDS; i = i + WG) { hd[i] = pages[base + i]; }
    for (var i = t; i < 8u; i = i + WG) { hd[PAGE_WORDS + i] = 0u; }
    workgroupBarrier();
    for (var k = PS / RP; k > 0u; k = k - 1u) {
        let e = bestPair((k - 1u) * RP + 2u * t);
        workgroupBarrier();
        atomicStore(&lk[(k - 1u) * WG + t], e);
    }
    workgroupBarrier();
    if (STOP == 3u) { storeRaw(pageIdx, t); return; }

    // 4. Match starts, 32 positions per invocation (in rh: the hashes
    // are dead).
    {
        let p0 = 32u * t;
        var bits = 0u;
        var b = lenAt(p0);
        for (var j = 0u; j < 32u; j = j + 1u) {
            let b1 = lenAt(p0 + j + 1u);
            if (b >= 4u && b1 <= b) { bits = bits | (1u << j); }
            b = b1;
        }
        rh[t] = bits;
    }
    workgroupBarrier();
    // Where the parse goes from each position x: the end of the match of
    // the first start at or after x (CAPF: a CAP-long match, extended by
    // the walk), 0 for none; a u16 per position in hd (the heads are
    // dead). 32 positions per invocation, right to left.
    // The first start after each invocation's 32 positions: a suffix
    // minimum over the words' first starts (log steps; a scan word by word
    // costs pages with few matches up to 127 loads an invocation).
    {
        let b = rh[t];
        rh[SCAN + t] = select(PS, 32u * t + countTrailingZeros(b), b != 0u);
    }
    workgroupBarrier();
    for (var d = 1u; d < WG; d = d * 2u) {
        var m = PS;
        if (t + d < WG) { m = rh[SCAN + t + d]; }
        workgroupBarrier();
        rh[SCAN + t] = min(rh[SCAN + t], m);
        workgroupBarrier();
    }
    {
        let p0 = 32u * t;
        var nx = PS;
        if (t + 1u < WG) { nx = rh[SCAN + t + 1u]; }
        let bits = rh[t];
        var hi = 0u;
        for (var j = 31i; j >= 0i; j = j - 1i) {
            let x = p0 + u32(j);
            if ((bits & (1u << u32(j))) != 0u) { nx = x; }
            var jv = 0u;
            if (nx < PS) {
                let ml = lenAt(nx);
                jv = (nx + ml) | select(0u, CAPF, ml == CAP);
            }
            if ((j & 1i) == 1i) { hi = jv << 16u; } else { hd[x >> 1u] = jv | hi; }
        }
    }
    workgroupBarrier();
    // The walk: one invocation follows the jumps (one load a match),
    // extends CAP-long matches and lists each sequence's anchor, then the
    // final one, as u16 pairs in tb (the round tables are dead).
    if (t == 0u) {
        var cur = 0u;
        var n = 0u;
        var lo = 0u;
        loop {
            let j = (hd[cur >> 1u] >> ((cur & 1u) * 16u)) & 0xffffu;
            if (j == 0u) { break; }
            if ((n & 1u) == 0u) { lo = cur; } else { atomicStore(&tb[n >> 1u], lo | (cur << 16u)); }
            n = n + 1u;
            var end = j & (CAPF - 1u);
            if ((j & CAPF) != 0u && (TUNE & 32u) == 0u) {
                let st = end - CAP;
                end = st + extend(st, eAt(st) & 0xfffu);
            }
            cur = end;
        }
        if ((n & 1u) == 0u) { lo = cur; }
        atomicStore(&tb[n >> 1u], select(lo | (cur << 16u), lo, (n & 1u) == 0u));
        bcast = n;
    }
    let nseq = workgroupUniformLoad(&bcast);
    if (STOP == 4u) { storeRaw(pageIdx, t); return; }
    // The sequences from their anchors, in parallel: the match starts at
    // the first start from the anchor and ends at the next anchor. The
    // jumps are dead: the sequences go to hd.
    for (var i = t; i < nseq; i = i + WG) {
        let a = anchorAt(i);
        let en = anchorAt(i + 1u);
        var w = a >> 5u;
        var b = rh[w] & (0xffffffffu << (a & 31u));
        loop {
            if (b != 0u) { break; }
            w = w + 1u;
            b = rh[w];
        }
        let st = w * 32u + countTrailingZeros(b);
        hd[i] = st | (en << 16u);
        hd[SEQ_LB + i] = eAt(st) & 0xfffu;
    }
    workgroupBarrier();
    // The matches are dead: the block is built in lk.
    for (var i = t; i < PS / 4u; i = i + WG) { atomicStore(&lk[i], 0u); }

    // 5. Sizes of this invocation's run of sequences (the last one,
    // index nseq, holds the final literals only) and their prefix sum.
    let per = (nseq + WG) / WG;
    let i0 = min(t * per, nseq + 1u);
    let i1 = min(i0 + per, nseq + 1u);
    var anchor = 0u;
    if (i0 > 0u) { anchor = hd[i0 - 1u] >> 16u; }
    var sum = 0u;
    var a = anchor;
    for (var i = i0; i < i1; i = i + 1u) {
        if (i < nseq) {
            let s = hd[i];
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
            let s = hd[i];
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
        if (i < nseq) { off = hd[SEQ_LB + i]; }
        hd[SEQ_LB + i] = o - a; // wraps: added to a position
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
            if ((hd[mid] >> 16u) > x0) { hi = mid; } else { lo = mid + 1u; }
        }
        var i = lo;
        var st = PS;
        var en = PS;
        if (i < nseq) {
            let s = hd[i];
            st = s & 0xffffu;
            en = s >> 16u;
        }
        var lb = hd[SEQ_LB + i];
        for (var j = 0u; j < 32u; j = j + 1u) {
            let x = x0 + j;
            if (x >= en) {
                i = i + 1u;
                st = PS;
                en = PS;
                if (i < nseq) {
                    let s = hd[i];
                    st = s & 0xffffu;
                    en = s >> 16u;
                }
                lb = hd[SEQ_LB + i];
            }
            if (x < st) { putByte(x + lb, byteAt(x)); }
        }
    }
    workgroupBarrier();
    let crc = storedSum(t, size, true);

    // 6. Append the block to the packed output.
    if (t == 0u) {
        bcast = atomicAdd(&total[0], (size + 3u) & ~3u);
    }
    let goff = workgroupUniformLoad(&bcast);
    let words = (size + 3u) / 4u;
    for (var w = t; w < words; w = w + WG) {
        packed[(goff >> 2u) + w] = atomicLoad(&lk[w]);
    }
    if (t == 0u) {
        info[4u * pageIdx] = 3u;
        info[4u * pageIdx + 1u] = size;
        info[4u * pageIdx + 2u] = goff;
        info[4u * pageIdx + 3u] = crc;
    }
}
