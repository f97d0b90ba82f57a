// Helpers of compress.wgsl (appended to it: WGSL declarations at module
// scope may come in any order): byte and word access to the page in
// workgroup memory, hashing, match lengths, LZ4 length bytes and the
// workgroup-memory prefix sum.

fn byteAt(i: u32) -> u32 {
    return (page[PAD + (i >> 2u)] >> ((i & 3u) * 8u)) & 0xffu;
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

// Hash of 6 bytes: k and the 2 bytes after (k6).
fn hash6(k: u32, k6: u32) -> u32 {
    return ((k * 2654435761u) ^ (k6 * 2246822519u)) >> (32u - HASH_BITS);
}

// Page word i, -PAD <= i < PAGE_WORDS+3; 0 outside the page.
fn pageWord(i: i32) -> u32 {
    return page[u32(i + i32(PAD))];
}

// The 4 bytes starting s/8 bytes into a (s a multiple of 8 below 32).
// b is shifted in two steps so that s = 0 needs no select (b << 32).
fn fsh(a: u32, b: u32, s: u32) -> u32 {
    return (a >> s) | ((b << 1u) << (31u - s));
}

// The new entry of position q where the CAP-long match at q-CAP has an
// offset that matches at q at least as long as q's own; else 0.
fn offsetFor(q: u32) -> u32 {
    if (q < CAP || q > MFLIMIT) { return 0u; }
    let ep = mtAt(q - CAP);
    let eq = mtAt(q);
    let d = ep & 0xfffu;
    if ((ep >> 12u) == CAP - 4u && eq != 0u && (eq & 0xfffu) != d && d <= q) {
        // The words at q in straight-line code, as in the match rounds:
        // a loop here (compare 4 bytes until they differ) costs registers,
        // and a workgroup per SM on the H100 (7% of the kernel's time).
        let b = i32(q >> 2u);
        let sh = (q & 3u) * 8u;
        let w0 = pageWord(b);
        let w1 = pageWord(b + 1);
        let w2 = pageWord(b + 2);
        let w3 = pageWord(b + 3);
        let w4 = pageWord(b + 4);
        let w5 = pageWord(b + 5);
        let v = vec4<u32>(fsh(w1, w2, sh), fsh(w2, w3, sh), fsh(w3, w4, sh), fsh(w4, w5, sh));
        let l = candLen(q - d, fsh(w0, w1, sh), v, min(CAP, MATCH_END - q));
        if (l >= (eq >> 12u) + 4u) { return ((l - 4u) << 12u) | d; }
    }
    return 0u;
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

// Length of the match of candidate c against p's key and the 16 bytes
// after it (v), capped at lim (<= CAP); 0 when the keys differ. No early
// return: the lengths of several candidates are computed side by side.
fn candLen(c: u32, key: u32, v: vec4<u32>, lim: u32) -> u32 {
    let cw = i32(c >> 2u);
    let cs = (c & 3u) * 8u;
    let u0 = pageWord(cw);
    let u1 = pageWord(cw + 1);
    let u2 = pageWord(cw + 2);
    let u3 = pageWord(cw + 3);
    let u4 = pageWord(cw + 4);
    let u5 = pageWord(cw + 5);
    let x = v ^ vec4<u32>(fsh(u1, u2, cs), fsh(u2, u3, cs), fsh(u3, u4, cs), fsh(u4, u5, cs));
    let z = countTrailingZeros(x) >> vec4<u32>(3u);
    var l = 20u;
    l = select(l, 16u + z.w, x.w != 0u);
    l = select(l, 12u + z.z, x.z != 0u);
    l = select(l, 8u + z.y, x.y != 0u);
    l = select(l, 4u + z.x, x.x != 0u);
    let r = select(min(l, lim), 4u, (TUNE & 4u) != 0u); // benchmarks: keys only
    return select(r, 0u, fsh(u0, u1, cs) != key);
}

// Bit j set where the 4 bytes starting j bytes into a (b after it) equal key.
fn eq4(a: u32, b: u32, key: u32) -> u32 {
    return select(0u, 1u, a == key) | select(0u, 2u, ((a >> 8u) | (b << 24u)) == key) |
           select(0u, 4u, ((a >> 16u) | (b << 16u)) == key) | select(0u, 8u, ((a >> 24u) | (b << 8u)) == key);
}

// The nearest of the 32 positions before p in this round (and in the
// page) with p's key, as one mask: every compare is independent, the
// nearest is the highest bit. Window byte rel starts at (p & ~3) - 32 + rel; rel < 32 in the low
// mask, 32..34 in the high one.
fn bscanMask(p: u32, rs: u32, a: u32, key: u32, q0: u32, q1: u32, q2: u32, q3: u32,
             w0: u32, w1: u32, w2: u32, w3: u32, w4: u32, w5: u32) -> u32 {
    let pa = p & ~3u;
    let lo = max(a, select(0u, rs + 32u - pa, rs + 32u > pa)); // <= 32
    let m = eq4(q0, q1, key) | (eq4(q1, q2, key) << 4u) | (eq4(q2, q3, key) << 8u) |
            (eq4(q3, w0, key) << 12u) | (eq4(w0, w1, key) << 16u) | (eq4(w1, w2, key) << 20u) |
            (eq4(w2, w3, key) << 24u) | (eq4(w3, w4, key) << 28u);
    let mlo = m & select(0u, 0xffffffffu << min(lo, 31u), lo < 32u);
    let mhi = eq4(w4, w5, key) & ((1u << a) - 1u); // rel 32+j < 32+a
    if (mhi != 0u) { return 32u + firstLeadingBit(mhi); }
    if (mlo != 0u) { return firstLeadingBit(mlo); }
    return 99u;
}

