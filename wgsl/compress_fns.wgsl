// Helpers of compress.wgsl (appended to it: WGSL declarations at module
// scope may come in any order): page access, hashing, the match search,
// LZ4 length bytes and the workgroup-memory prefix sum.

fn byteAt(i: u32) -> u32 {
    return (page[PAD + (i >> 2u)] >> ((i & 3u) * 8u)) & 0xffu;
}

// Page word i (0 past the page's end, up to 8 words).
fn pageWord(i: u32) -> u32 {
    return page[PAD + i];
}

// The 4 bytes starting s/8 bytes into a (s a multiple of 8 below 32).
// b is shifted in two steps so that s = 0 needs no select (b << 32).
fn fsh(a: u32, b: u32, s: u32) -> u32 {
    return (a >> s) | ((b << 1u) << (31u - s));
}

// The 4 bytes at position p, little-endian.
fn load32(p: u32) -> u32 {
    let w = p >> 2u;
    return fsh(pageWord(w), pageWord(w + 1u), (p & 3u) * 8u);
}

fn hashOf(k: u32) -> u32 {
    return (k * 2654435761u) >> (32u - HASH_BITS);
}

// Chain link of p: the nearest earlier position with its hash, plus one
// (0: none).
fn linkAt(p: u32) -> u32 {
    return (atomicLoad(&S[S_LINK + (p >> 1u)]) >> ((p & 1u) * 16u)) & 0xffffu;
}

// Best match of p, (len-4)<<12 | offset (0: none).
fn eAt(p: u32) -> u32 {
    return (atomicLoad(&S[S_E + (p >> 1u)]) >> ((p & 1u) * 16u)) & 0xffffu;
}

// Length of p's best match (0: none); positions past LAST have none.
fn lenAt(p: u32) -> u32 {
    if (p > LAST) { return 0u; }
    let e = eAt(p);
    if (e == 0u) { return 0u; }
    return (e >> 12u) + 4u;
}

// The best of up to DEPTH chain candidates of p, their lengths compared
// up to CAP (and the end-of-block limit); ties go to the nearest. The
// bytes at p are read once into registers.
fn bestAt(p: u32) -> u32 {
    if (p > LAST) { return 0u; }
    let b = p >> 2u;
    let sh = (p & 3u) * 8u;
    let w0 = pageWord(b);
    let w1 = pageWord(b + 1u);
    let w2 = pageWord(b + 2u);
    let w3 = pageWord(b + 3u);
    let w4 = pageWord(b + 4u);
    let w5 = pageWord(b + 5u);
    let key = fsh(w0, w1, sh);
    let v = vec4<u32>(fsh(w1, w2, sh), fsh(w2, w3, sh), fsh(w3, w4, sh), fsh(w4, w5, sh));
    let lim = min(MATCH_END - p, CAP);
    var best = 0u;
    var boff = 0u;
    var q = linkAt(p);
    for (var d = 0u; d < DEPTH; d = d + 1u) {
        if (q == 0u || best >= lim) { break; }
        let c = q - 1u;
        let l = candLen(c, key, v, lim);
        if (l > best) {
            best = l;
            boff = p - c;
        }
        q = linkAt(c);
    }
    if (best < 4u) { return 0u; }
    return ((best - 4u) << 12u) | boff;
}

// Length of the match of candidate c against p's key and the 16 bytes
// after it (v), capped at lim (<= CAP); 0 when the keys differ.
fn candLen(c: u32, key: u32, v: vec4<u32>, lim: u32) -> u32 {
    let cw = c >> 2u;
    let cs = (c & 3u) * 8u;
    let u0 = pageWord(cw);
    let u1 = pageWord(cw + 1u);
    if (fsh(u0, u1, cs) != key) { return 0u; }
    let u2 = pageWord(cw + 2u);
    let u3 = pageWord(cw + 3u);
    let u4 = pageWord(cw + 4u);
    let u5 = pageWord(cw + 5u);
    let x = v ^ vec4<u32>(fsh(u1, u2, cs), fsh(u2, u3, cs), fsh(u3, u4, cs), fsh(u4, u5, cs));
    let z = countTrailingZeros(x) >> vec4<u32>(3u);
    var l = 20u;
    l = select(l, 16u + z.w, x.w != 0u);
    l = select(l, 12u + z.z, x.z != 0u);
    l = select(l, 8u + z.y, x.y != 0u);
    l = select(l, 4u + z.x, x.x != 0u);
    return min(l, lim);
}

// The full length of the match at s with offset off (at least CAP bytes
// long), up to MATCH_END, compared 4 bytes at a time.
fn extend(s: u32, off: u32) -> u32 {
    var l = CAP;
    loop {
        if (s + l >= MATCH_END) { break; }
        let x = load32(s + l) ^ load32(s + l - off);
        if (x != 0u) {
            l = l + (countTrailingZeros(x) >> 3u);
            break;
        }
        l = l + 4u;
    }
    return min(l, MATCH_END - s);
}

// The page goes out raw (the block did not fit, or a benchmark stopped).
fn storeRaw(pageIdx: u32, t: u32) {
    if (t == 0u) {
        info[4u * pageIdx] = 5u;
        info[4u * pageIdx + 1u] = PS;
        info[4u * pageIdx + 2u] = 0u;
        info[4u * pageIdx + 3u] = 0u;
    }
}

fn extra(n: u32) -> u32 {
    if (n < 15u) { return 0u; }
    return (n - 15u) / 255u + 1u;
}

fn putByte(o: u32, b: u32) {
    atomicOr(&S[S_OUT + (o >> 2u)], b << ((o & 3u) * 8u));
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
