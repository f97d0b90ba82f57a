// Compaction of the compressed slots. "scan" (one workgroup) turns the
// LZ4 pages' sizes into 4-byte aligned offsets (info[4*i+2]) and a total;
// "gather" (one workgroup per page) copies each LZ4 block to its offset.
// Reduce-then-scan in one workgroup: no cross-workgroup progress is assumed.

struct Params {
    n: u32,
    threshold: u32,
    pad0: u32,
    pad1: u32,
}

const PAGE_WORDS: u32 = PAGE_WORDS_V;
const SCAN_WG: u32 = 256u;
const GATHER_WG: u32 = 64u;

@group(0) @binding(0) var<storage, read_write> info: array<u32>;
@group(0) @binding(1) var<storage, read_write> total: array<u32>;
@group(0) @binding(2) var<uniform> params: Params;

var<workgroup> sums: array<u32, SCAN_WG>;

fn alignedSize(i: u32) -> u32 {
    if (info[4u * i] == 3u) {
        return (info[4u * i + 1u] + 3u) & ~3u;
    }
    return 0u;
}

@compute @workgroup_size(SCAN_WG)
fn scan(@builtin(local_invocation_index) t: u32) {
    let n = params.n;
    let per = (n + SCAN_WG - 1u) / SCAN_WG;
    let lo = min(t * per, n);
    let hi = min(lo + per, n);
    var s = 0u;
    for (var i = lo; i < hi; i = i + 1u) {
        s = s + alignedSize(i);
    }
    sums[t] = s;
    workgroupBarrier();
    // Hillis-Steele inclusive scan over the per-invocation sums.
    for (var d = 1u; d < SCAN_WG; d = d * 2u) {
        var v = 0u;
        if (t >= d) { v = sums[t - d]; }
        workgroupBarrier();
        sums[t] = sums[t] + v;
        workgroupBarrier();
    }
    var off = sums[t] - s;
    for (var i = lo; i < hi; i = i + 1u) {
        let a = alignedSize(i);
        if (info[4u * i] == 3u) {
            info[4u * i + 2u] = off;
        }
        off = off + a;
    }
    if (t == SCAN_WG - 1u) {
        total[0] = sums[t];
    }
}

@group(0) @binding(0) var<storage, read> ginfo: array<u32>;
@group(0) @binding(1) var<storage, read> gslots: array<u32>;
@group(0) @binding(2) var<storage, read_write> packed: array<u32>;
@group(0) @binding(3) var<uniform> gparams: Params;

@compute @workgroup_size(GATHER_WG)
fn gather(@builtin(workgroup_id) wid: vec3<u32>,
          @builtin(num_workgroups) nwg: vec3<u32>,
          @builtin(local_invocation_index) t: u32) {
    let i = wid.y * nwg.x + wid.x;
    if (i >= gparams.n || ginfo[4u * i] != 3u) {
        return;
    }
    let words = (ginfo[4u * i + 1u] + 3u) / 4u;
    let dst = ginfo[4u * i + 2u] / 4u;
    let src = i * PAGE_WORDS;
    for (var w = t; w < words; w = w + GATHER_WG) {
        packed[dst + w] = gslots[src + w];
    }
}
