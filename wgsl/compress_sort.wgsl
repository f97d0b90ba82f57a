// The match search of compress.wgsl without sequential rounds (appended to
// it, used when SORT): every position is sorted by the hash of its 4 bytes
// (a stable radix sort, 3 passes of 4 bits, in workgroup memory), so that
// each position finds the nearest earlier position with the same 4 bytes
// next to it in the sorted order. Those links form chains, nearest first,
// and a position's candidates are the first CHAIN links of its chain.
//
// Workgroup memory: the two sort buffers (u16 positions) are A[0, 4096);
// the digit counters are mt, which is zeroed before the matches go in.

const SORT_BITS: u32 = SORT_BITS_V; // hash bits sorted on, 4 a pass
const OWNERS: u32 = WG;      // every invocation counts and scatters
const PER: u32 = PS / OWNERS; // the positions each owns (16)
const EB0: u32 = 0u;         // sort buffers (u16 pairs)
const EB1: u32 = PS / 2u;
// The sorted order is in SB after the last pass; the links go to LB.
const SB: u32 = select(EB0, EB1, (SORT_BITS / 4u) % 2u == 0u);
const LB: u32 = select(EB1, EB0, (SORT_BITS / 4u) % 2u == 0u);
const LOOKBACK: u32 = 4u;    // earlier entries of a bucket searched for the same key
const CHAIN: u32 = CHAIN_V;  // candidates compared per position

fn hashS(k: u32) -> u32 {
    return (k * 2654435761u) >> (32u - SORT_BITS);
}

fn u16At(base: u32, j: u32) -> u32 {
    return (atomicLoad(&A[base + (j >> 1u)]) >> ((j & 1u) * 16u)) & 0xffffu;
}

// 16 counters of 8 bits in a vec4: returns counter d, then adds 1 to it.
fn bump(c: ptr<function, vec4<u32>>, d: u32) -> u32 {
    let w = d >> 2u;
    let sh = (d & 3u) * 8u;
    let x = select(select(select((*c).x, (*c).y, w == 1u), (*c).z, w == 2u), (*c).w, w == 3u);
    let inc = 1u << sh;
    (*c) = (*c) + vec4<u32>(select(0u, inc, w == 0u), select(0u, inc, w == 1u),
                            select(0u, inc, w == 2u), select(0u, inc, w == 3u));
    return (x >> sh) & 0xffu;
}

// Owner o's counter of digit d (u16; the pair of digits 2k, 2k+1 of an
// owner shares a word, so each owner writes only its own words).
fn cntWord(d: u32, o: u32) -> u32 { return (d >> 1u) * OWNERS + o; }

fn cntAt(d: u32, o: u32) -> u32 {
    return (atomicLoad(&mt[cntWord(d, o)]) >> ((d & 1u) * 16u)) & 0xffffu;
}

// One pass of the radix sort on digit ps: positions from buffer src
// (pass 0: in position order) to dst, stable.
fn sortPass(t: u32, useSG: bool, ps: u32, src: u32, dst: u32) {
    let sh = ps * 4u;
    var c = vec4<u32>(0u);
    var dl = 0u; // the 16 digits, 4 bits each, for the scatter
    var dh = 0u;
    for (var i = 0u; i < PER; i = i + 1u) {
        var q = t * PER + i;
        if (ps != 0u) { q = u16At(src, q); }
        let d = (hashS(load32(q)) >> sh) & 15u;
        _ = bump(&c, d);
        if (i < 8u) { dl = dl | (d << (4u * i)); } else { dh = dh | (d << (4u * (i - 8u))); }
    }
    for (var d = 0u; d < 16u; d = d + 2u) {
        let x = select(select(select(c.x, c.y, d >= 4u), c.z, d >= 8u), c.w, d >= 12u);
        let s2 = (d & 3u) * 8u;
        atomicStore(&mt[cntWord(d, t)], ((x >> s2) & 0xffu) | (((x >> (s2 + 8u)) & 0xffu) << 16u));
    }
    for (var w = t; w < PS / 2u; w = w + WG) { atomicStore(&A[dst + w], 0u); }
    workgroupBarrier();
    // Counters in (digit, owner) order: their exclusive sums are where
    // each owner's elements of each digit go. Invocation t sums 16 of
    // them: digit t/16, owners 16*(t%16) on.
    let d0 = t >> 4u;
    let o0 = (t & 15u) * 16u;
    var s = 0u;
    for (var j = 0u; j < 16u; j = j + 1u) { s = s + cntAt(d0, o0 + j); }
    var sc: vec2<u32>;
    if (useSG) {
        sc = SG_CALL_V(t, s);
    } else {
        sc = scanWG(t, s);
    }
    var run = sc.x;
    let hs = (d0 & 1u) * 16u;
    for (var j = 0u; j < 16u; j = j + 1u) {
        let w = cntWord(d0, o0 + j);
        let x = (atomicLoad(&mt[w]) >> hs) & 0xffffu;
        // The other half is another invocation's digit: and / or leave it.
        atomicAnd(&mt[w], ~(0xffffu << hs));
        atomicOr(&mt[w], run << hs);
        run = run + x;
    }
    workgroupBarrier();
    c = vec4<u32>(0u);
    for (var i = 0u; i < PER; i = i + 1u) {
        var q = t * PER + i;
        if (ps != 0u) { q = u16At(src, q); }
        let d = (select(dh, dl, i < 8u) >> (4u * (i & 7u))) & 15u;
        let j = cntAt(d, t) + bump(&c, d);
        atomicOr(&A[dst + (j >> 1u)], q << ((j & 1u) * 16u));
    }
    workgroupBarrier();
}

// Matches of every position into mt, as the rounds of compress.wgsl do.
fn sortMatch(t: u32, useSG: bool) {
    if ((TUNE & 65536u) == 0u) { // benchmarks: 65536 leaves the sort out
        for (var ps = 0u; ps < SORT_BITS / 4u; ps = ps + 1u) {
            sortPass(t, useSG, ps, select(EB0, EB1, (ps & 1u) == 0u), select(EB1, EB0, (ps & 1u) == 0u));
        }
    }
    for (var w = t; w < PS / 2u; w = w + WG) {
        atomicStore(&A[LB + w], 0u);
        atomicStore(&mt[w], 0u);
    }
    workgroupBarrier();
    // Links: the nearest earlier position of the bucket with the same 4
    // bytes (looked for among the LOOKBACK entries before), plus one.
    for (var j = t; j < PS; j = j + WG) {
        let q = u16At(SB, j) & (PS - 1u);
        let k = load32(q);
        let h = hashS(k);
        var link = 0u;
        for (var b = 1u; b <= LOOKBACK; b = b + 1u) {
            if (b > j) { break; }
            let r = u16At(SB, j - b) & (PS - 1u);
            let kr = load32(r);
            if (hashS(kr) != h) { break; }
            if (kr == k) { link = r + 1u; break; }
        }
        if (link != 0u) { atomicOr(&A[LB + (q >> 1u)], link << ((q & 1u) * 16u)); }
    }
    workgroupBarrier();
    for (var p = t; p <= select(MFLIMIT, 0u, (TUNE & 32768u) != 0u); p = p + WG) {
        let b0 = i32(p >> 2u);
        let sh = (p & 3u) * 8u;
        let w0 = pageWord(b0);
        let w1 = pageWord(b0 + 1);
        let w2 = pageWord(b0 + 2);
        let w3 = pageWord(b0 + 3);
        let w4 = pageWord(b0 + 4);
        let w5 = pageWord(b0 + 5);
        let key = fsh(w0, w1, sh);
        let v = vec4<u32>(fsh(w1, w2, sh), fsh(w2, w3, sh), fsh(w3, w4, sh), fsh(w4, w5, sh));
        let lim = min(CAP, MATCH_END - p);
        var best = 0u;
        var boff = 0u;
        var c = u16At(LB, p);
        for (var d = 0u; d < CHAIN; d = d + 1u) {
            if (c == 0u || best >= lim) { break; }
            let l = candLen(c - 1u, key, v, lim);
            if (l > best) { best = l; boff = p + 1u - c; }
            c = u16At(LB, c - 1u);
        }
        if (best >= 4u) {
            atomicOr(&mt[p >> 1u], (((best - 4u) << 12u) | boff) << (16u * (p & 1u)));
        }
    }
    workgroupBarrier();
}
