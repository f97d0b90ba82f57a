// Subgroup form of scanWG (compress.wgsl), spliced in when the adapter
// offers the subgroups feature. The kernel uses it only where subgroups
// are contiguous runs of invocation indices (checked per workgroup), so
// both forms give the same sums.
var<workgroup> sgSums: array<u32, WG / 4u>; // the smallest subgroup is 4

fn scanSG(t: u32, v: u32) -> vec2<u32> {
    let ex = subgroupExclusiveAdd(v);
    let tot = subgroupAdd(v);
    let g = t / sgSz;
    if (sgId == 0u) { sgSums[g] = tot; }
    workgroupBarrier();
    var before = 0u;
    var all = 0u;
    for (var k = 0u; k < WG / sgSz; k = k + 1u) {
        let s = sgSums[k];
        if (k < g) { before = before + s; }
        all = all + s;
    }
    workgroupBarrier();
    return vec2<u32>(before + ex, all);
}
