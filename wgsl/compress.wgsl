// Page classification and LZ4 block compression, one page per workgroup.
// Output per page (info[4*i..]): class (1 zero, 2 same, 3 lz4, 5 raw),
// size in bytes, and the fill word (lo, hi) of same-filled pages.
// The LZ4 block keeps the format's end-of-block rules: the last match
// starts at least 12 bytes before the end, the last 5 bytes are literals.

struct Params {
    n: u32,          // pages in the batch
    threshold: u32,  // a block larger than this is stored raw
    pad0: u32,
    pad1: u32,
}

@group(0) @binding(0) var<storage, read> pages: array<u32>;
@group(0) @binding(1) var<storage, read_write> slots: array<u32>;
@group(0) @binding(2) var<storage, read_write> info: array<u32>;
@group(0) @binding(3) var<uniform> params: Params;

const PAGE_WORDS: u32 = PAGE_WORDS_V;
const PS: u32 = PAGE_WORDS * 4u;
const WG: u32 = WG_V;
const HASH_BITS: u32 = HASH_BITS_V;
const HASH_SIZE: u32 = 1u << HASH_BITS;
const MFLIMIT: u32 = PS - 12u;     // last position a match may start at
const MATCH_END: u32 = PS - 5u;    // a match must end by here
const BACKSCAN: u32 = 16u;          // in-round positions searched directly
const ROUNDS: u32 = (MFLIMIT + WG) / WG;

var<workgroup> page: array<u32, PAGE_WORDS>;
// Latest position + 1 with a given hash, start earlier rounds (0 = none).
var<workgroup> table: array<atomic<u32>, HASH_SIZE>;
// Two u16 match offsets per word (0 = no match), set with atomicOr.
var<workgroup> cand: array<atomic<u32>, PAGE_WORDS * 2u>;
// One bit per position that has a match candidate: the walk skips to
// the next set bit instead of stepping through literals.
var<workgroup> mbits: array<atomic<u32>, PAGE_WORDS / 8u>;
var<workgroup> differ: atomic<u32>;
var<workgroup> differFlag: u32;

// Output state of the single encoding invocation.
var<private> acc: u32;
var<private> accN: u32;
var<private> op: u32;
var<private> slotBase: u32;
var<private> limit: u32;

fn byteAt(i: u32) -> u32 {
    return (page[i >> 2u] >> ((i & 3u) * 8u)) & 0xffu;
}

// Four bytes start any byte position i <= PS-4 (little endian).
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

fn putByte(b: u32) {
    acc = acc | (b << (accN * 8u));
    accN = accN + 1u;
    op = op + 1u;
    if (accN == 4u) {
        let w = (op - 4u) >> 2u;
        if (w < PAGE_WORDS) {
            slots[slotBase + w] = acc;
        }
        acc = 0u;
        accN = 0u;
    }
}

fn flush() {
    if (accN > 0u) {
        let w = op >> 2u;
        if (w < PAGE_WORDS) {
            slots[slotBase + w] = acc;
        }
    }
}

fn putLength(n: u32) {
    var r = n;
    loop {
        if (r < 255u || op > limit) { break; }
        putByte(255u);
        r = r - 255u;
    }
    putByte(r);
}

// Four bytes at once; the pending bytes in acc stay pending.
fn putWord(x: u32) {
    if (accN == 0u) {
        let w = op >> 2u;
        if (w < PAGE_WORDS) {
            slots[slotBase + w] = x;
        }
    } else {
        let sh = accN * 8u;
        let w = (op - accN) >> 2u;
        if (w < PAGE_WORDS) {
            slots[slotBase + w] = acc | (x << sh);
        }
        acc = x >> (32u - sh);
    }
    op = op + 4u;
}

fn putLiterals(start: u32, n: u32) {
    var i = 0u;
    loop {
        if (i + 4u > n || op > limit) { break; }
        putWord(load32(start + i));
        i = i + 4u;
    }
    loop {
        if (i >= n || op > limit) { break; }
        putByte(byteAt(start + i));
        i = i + 1u;
    }
}

fn offsetAt(p: u32) -> u32 {
    return (atomicLoad(&cand[p >> 1u]) >> ((p & 1u) * 16u)) & 0xffffu;
}

@compute @workgroup_size(WG)
fn compress(@builtin(workgroup_id) wid: vec3<u32>,
            @builtin(num_workgroups) nwg: vec3<u32>,
            @builtin(local_invocation_index) t: u32) {
    let pageIdx = wid.y * nwg.x + wid.x;
    if (pageIdx >= params.n) {
        return; // uniform: depends on the workgroup only
    }
    let base = pageIdx * PAGE_WORDS;
    let f0 = pages[base];
    let f1 = pages[base + 1u];

    // Load the page and test every 8-byte word against the first.
    for (var i = t; i < PAGE_WORDS / 2u; i = i + WG) {
        let a = pages[base + 2u * i];
        let b = pages[base + 2u * i + 1u];
        page[2u * i] = a;
        page[2u * i + 1u] = b;
        if (a != f0 || b != f1) {
            atomicOr(&differ, 1u);
        }
    }
    workgroupBarrier();
    if (t == 0u) {
        differFlag = atomicLoad(&differ);
    }
    if (workgroupUniformLoad(&differFlag) == 0u) {
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

    // Match candidates: in round r invocation t takes position r*WG+t;
    // lookups see earlier rounds' inserts plus the last BACKSCAN positions.
    for (var r = 0u; r < ROUNDS; r = r + 1u) {
        let p = r * WG + t;
        var h = HASH_SIZE;
        if (p <= MFLIMIT) {
            let key = load32(p);
            h = hashOf(key);
            var off = 0u;
            // The table holds earlier rounds only: look back a few
            // positions of this round directly, then at the table.
            let lo = max(r * WG, max(p, BACKSCAN) - BACKSCAN);
            for (var j = p; j > lo; j = j - 1u) {
                if (load32(j - 1u) == key) {
                    off = p - (j - 1u);
                    break;
                }
            }
            let c1 = atomicLoad(&table[h]);
            if (off == 0u && c1 != 0u) {
                let c = c1 - 1u;
                if (c < p && p - c < 65536u && load32(c) == key) {
                    off = p - c;
                }
            }
            if (off != 0u) {
                atomicOr(&cand[p >> 1u], off << (16u * (p & 1u)));
                atomicOr(&mbits[p >> 5u], 1u << (p & 31u));
            }
        }
        workgroupBarrier();
        if (h < HASH_SIZE) { atomicMax(&table[h], p + 1u); }
        workgroupBarrier();
    }

    // Greedy parse and encoding by one invocation.
    if (t == 0u) {
        acc = 0u;
        accN = 0u;
        op = 0u;
        slotBase = pageIdx * PAGE_WORDS;
        limit = min(params.threshold, PS);
        var ip = 0u;
        var anchor = 0u;
        loop {
            // Every pending literal costs at least a byte: stop as soon
            // as the block cannot fit any more.
            if (ip > MFLIMIT || op + (ip - anchor) > limit) { break; }
            var w = ip >> 5u;
            var bits = atomicLoad(&mbits[w]) & (0xffffffffu << (ip & 31u));
            loop {
                if (bits != 0u || w + 1u >= PAGE_WORDS / 8u) { break; }
                w = w + 1u;
                bits = atomicLoad(&mbits[w]);
            }
            if (bits == 0u) { break; }
            ip = w * 32u + countTrailingZeros(bits);
            if (ip > MFLIMIT || op + (ip - anchor) > limit) { break; }
            let off = offsetAt(ip);
            var mref = ip - off;
            var mmax = MATCH_END - ip;
            var ml = 4u;
            loop {
                if (ml + 4u > mmax) { break; }
                let x = load32(ip + ml) ^ load32(mref + ml);
                if (x != 0u) {
                    ml = ml + (countTrailingZeros(x) >> 3u);
                    break;
                }
                ml = ml + 4u;
            }
            if (ml + 4u > mmax) {
                loop {
                    if (ml >= mmax || byteAt(ip + ml) != byteAt(mref + ml)) { break; }
                    ml = ml + 1u;
                }
            }
            // Extend backwards over literals not yet emitted.
            loop {
                if (ip <= anchor || mref == 0u || byteAt(ip - 1u) != byteAt(mref - 1u)) { break; }
                ip = ip - 1u;
                mref = mref - 1u;
                ml = ml + 1u;
            }
            let lit = ip - anchor;
            let mcode = ml - 4u;
            putByte((min(lit, 15u) << 4u) | min(mcode, 15u));
            if (lit >= 15u) { putLength(lit - 15u); }
            putLiterals(anchor, lit);
            putByte(off & 0xffu);
            putByte(off >> 8u);
            if (mcode >= 15u) { putLength(mcode - 15u); }
            ip = ip + ml;
            anchor = ip;
        }
        if (op + 1u + (PS - anchor) > limit) {
            op = limit + 1u;
        }
        if (op <= limit) {
            let lit = PS - anchor;
            putByte(min(lit, 15u) << 4u);
            if (lit >= 15u) { putLength(lit - 15u); }
            putLiterals(anchor, lit);
            flush();
        }
        if (op <= limit) {
            info[4u * pageIdx] = 3u;
            info[4u * pageIdx + 1u] = op;
        } else {
            info[4u * pageIdx] = 5u;
            info[4u * pageIdx + 1u] = PS;
        }
        info[4u * pageIdx + 2u] = 0u;
        info[4u * pageIdx + 3u] = 0u;
    }
}
