// Helpers of compress.wgsl (appended to it: WGSL declarations at module
// scope may come in any order): page access, hashing, the match search,
// LZ4 length bytes and the workgroup-memory prefix sum.

// Page word i; past the page's end, its last word (bytes there are never
// part of a result: lengths are capped at the block's end).
fn pageWord(i: u32) -> u32 {
    return pages[pbase + min(i, PAGE_WORDS - 1u)];
}

// Page word i from its copy in hd (the match search; zeros follow it).
fn copyWord(i: u32) -> u32 {
    return hd[i];
}

fn byteAt(i: u32) -> u32 {
    return (pageWord(i >> 2u) >> ((i & 3u) * 8u)) & 0xffu;
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

// The nearest of the WIN round positions below x with hash h (RP: none).
// Every neighbour is read, so that the loads go out together.
fn nearBelow(x: u32, h: u32) -> u32 {
    var q = RP;
    for (var k = WIN; k >= 1u; k = k - 1u) {
        if (k <= x && rh[(x - k) & (RP - 1u)] == h) { q = x - k; }
    }
    return select(q, RP, h == NOH);
}

const NOEXP: u32 = 0xffffu; // expose: not exposed

// Whether round position x is exposed (none of the WIN above it has its
// hash h): an exposed one joins its bucket's list, and its next entry
// there (the position+1 it displaced, 0: none) is returned; else NOEXP.
fn expose(x: u32, h: u32, tbase: u32) -> u32 {
    var ex = h != NOH;
    for (var k = 1u; k <= WIN; k = k + 1u) {
        if (x + k < RP && rh[(x + k) & (RP - 1u)] == h) { ex = false; }
    }
    if (!ex) { return NOEXP; }
    return atomicExchange(&tb[tbase + (h & (NB - 1u))], x + 1u);
}

const LASTF: u32 = 0x10000u; // linkOf: the last of its hash in the round

// The chain link of round position x (rs + x): its nearest lower position
// with hash h in the round (q from the window, else from the bucket's
// list), else the head. LASTF is set when x is exposed and no later
// position of the round has its hash.
fn linkOf(rs: u32, x: u32, h: u32, q: u32, e: bool, tbase: u32) -> u32 {
    if (h == NOH) { return 0u; }
    var near = q;
    var above = false;
    if (q == RP || e) {
        var y1 = atomicLoad(&tb[tbase + (h & (NB - 1u))]);
        loop {
            if (y1 == 0u) { break; }
            let y = y1 - 1u;
            if (rh[y] == h) {
                if (y > x) {
                    above = true;
                } else if (q == RP && y < x && (near == RP || y > near)) {
                    near = y;
                }
            }
            y1 = (rl[y >> 1u] >> ((y & 1u) * 16u)) & 0xffffu;
        }
    }
    var link = hd[h];
    if (near != RP) { link = rs + near + 1u; }
    return select(link, link | LASTF, e && !above);
}

// Chain link of p: the nearest earlier position with its hash, plus one
// (0: none).
fn linkAt(p: u32) -> u32 {
    return (atomicLoad(&lk[p >> 1u]) >> ((p & 1u) * 16u)) & 0xffffu;
}

// Best match of p, (len-4)<<12 | offset (0: none).
fn eAt(p: u32) -> u32 {
    return (atomicLoad(&lk[p >> 1u]) >> ((p & 1u) * 16u)) & 0xffffu;
}

// Length of p's best match (0: none); positions past LAST have none.
fn lenAt(p: u32) -> u32 {
    if (p > LAST) { return 0u; }
    let e = eAt(p);
    if (e == 0u) { return 0u; }
    return (e >> 12u) + 4u;
}

// The best matches of p and p+1 (p even), (len-4)<<12 | offset each (0:
// none) in the low and high halves: of up to DEPTH chain candidates, the
// longest, lengths compared up to CAP (and the end-of-block limit); ties
// go to the nearest. The two chains are walked side by side, every load
// unconditional, so that their loads overlap.
fn bestPair(p: u32) -> u32 {
    let b = p >> 2u;
    let sh = (p & 3u) * 8u; // 0 or 16
    let w0 = copyWord(b);
    let w1 = copyWord(b + 1u);
    let w2 = copyWord(b + 2u);
    let w3 = copyWord(b + 3u);
    let w4 = copyWord(b + 4u);
    let w5 = copyWord(b + 5u);
    let key0 = fsh(w0, w1, sh);
    let v0 = vec4<u32>(fsh(w1, w2, sh), fsh(w2, w3, sh), fsh(w3, w4, sh), fsh(w4, w5, sh));
    let key1 = fsh(w0, w1, sh + 8u);
    let v1 = vec4<u32>(fsh(w1, w2, sh + 8u), fsh(w2, w3, sh + 8u), fsh(w3, w4, sh + 8u), fsh(w4, w5, sh + 8u));
    let lim0 = select(0u, min(MATCH_END - p, CAP), p <= LAST);
    let lim1 = select(0u, min(MATCH_END - p - 1u, CAP), p + 1u <= LAST);
    let l2 = atomicLoad(&lk[p >> 1u]);
    var q0 = select(0u, l2 & 0xffffu, lim0 != 0u);
    var q1 = select(0u, l2 >> 16u, lim1 != 0u);
    var best0 = 0u;
    var best1 = 0u;
    var off0 = 0u;
    var off1 = 0u;
    for (var d = 0u; d < DEPTH; d = d + 1u) {
        let a0 = q0 != 0u && best0 < lim0;
        let a1 = q1 != 0u && best1 < lim1;
        if (!a0 && !a1) { break; }
        let c0 = select(0u, q0 - 1u, a0);
        let c1 = select(0u, q1 - 1u, a1);
        let n0 = linkAt(c0);
        let n1 = linkAt(c1);
        let m0 = candLen(c0, key0, v0, lim0);
        let m1 = candLen(c1, key1, v1, lim1);
        if (a0 && m0 > best0) { best0 = m0; off0 = p - c0; }
        if (a1 && m1 > best1) { best1 = m1; off1 = p + 1u - c1; }
        q0 = select(0u, n0, a0);
        q1 = select(0u, n1, a1);
    }
    let e0 = select(0u, ((best0 - 4u) << 12u) | off0, best0 >= 4u);
    let e1 = select(0u, ((best1 - 4u) << 12u) | off1, best1 >= 4u);
    return e0 | (e1 << 16u);
}

// Length of the match of candidate c against p's key and the 16 bytes
// after it (v), capped at lim (<= CAP); 0 when the keys differ. No
// branch: the loads of two candidates go out together.
fn candLen(c: u32, key: u32, v: vec4<u32>, lim: u32) -> u32 {
    let cw = c >> 2u;
    let cs = (c & 3u) * 8u;
    let u0 = copyWord(cw);
    let u1 = copyWord(cw + 1u);
    let u2 = copyWord(cw + 2u);
    let u3 = copyWord(cw + 3u);
    let u4 = copyWord(cw + 4u);
    let u5 = copyWord(cw + 5u);
    let x = v ^ vec4<u32>(fsh(u1, u2, cs), fsh(u2, u3, cs), fsh(u3, u4, cs), fsh(u4, u5, cs));
    let z = countTrailingZeros(x) >> vec4<u32>(3u);
    var l = 20u;
    l = select(l, 16u + z.w, x.w != 0u);
    l = select(l, 12u + z.z, x.z != 0u);
    l = select(l, 8u + z.y, x.y != 0u);
    l = select(l, 4u + z.x, x.x != 0u);
    return select(min(l, lim), 0u, fsh(u0, u1, cs) != key);
}

// The full length of the match at s with offset off (at least CAP bytes
// long), up to MATCH_END, compared 8 bytes at a time.
fn extend(s: u32, off: u32) -> u32 {
    var l = CAP;
    loop {
        if (s + l >= MATCH_END) { break; }
        let a = s + l;
        let x0 = load32(a) ^ load32(a - off);
        let x1 = load32(a + 4u) ^ load32(a + 4u - off);
        if (x0 != 0u) {
            l = l + (countTrailingZeros(x0) >> 3u);
            break;
        }
        if (x1 != 0u) {
            l = l + 4u + (countTrailingZeros(x1) >> 3u);
            break;
        }
        l = l + 8u;
    }
    return min(l, MATCH_END - s);
}

const CAPF: u32 = 0x8000u; // a jump to the end of a CAP-long match, to extend

// The walk's anchor i (u16 pairs in tb).
fn anchorAt(i: u32) -> u32 {
    return (atomicLoad(&tb[i >> 1u]) >> ((i & 1u) * 16u)) & 0xffffu;
}

// The page goes out raw (the block did not fit, or a benchmark stopped).
fn storeRaw(pageIdx: u32, t: u32) {
    let sum = storedSum(t, PS, false);
    if (t == 0u) {
        info[4u * pageIdx] = 5u;
        info[4u * pageIdx + 1u] = PS;
        info[4u * pageIdx + 2u] = 0u;
        info[4u * pageIdx + 3u] = sum;
    }
}

fn extra(n: u32) -> u32 {
    if (n < 15u) { return 0u; }
    return (n - 15u) / 255u + 1u;
}

fn putByte(o: u32, b: u32) {
    atomicOr(&lk[o >> 2u], b << ((o & 3u) * 8u));
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
    rh[SCAN + t] = v;
    workgroupBarrier();
    for (var d = 1u; d < WG; d = d * 2u) {
        var x = 0u;
        if (t >= d) { x = rh[SCAN + t - d]; }
        workgroupBarrier();
        rh[SCAN + t] = rh[SCAN + t] + x;
        workgroupBarrier();
    }
    let r = vec2<u32>(rh[SCAN + t] - v, rh[SCAN + WG - 1u]);
    workgroupBarrier();
    return r;
}

// CRC-32C (Castagnoli, reflected) of the page's stored bytes: the first
// s bytes of the block in lk (inLk) or of the page itself (raw). Each
// invocation runs the CRC from register 0 over its 32 bytes; that CRC is
// linear, so the pieces combine by XOR once each is shifted past the
// bytes after it (crcShift, crc.wgsl), and the register's start of ~0 is
// one more such term. Called by the whole workgroup, uniformly.
fn storedSum(t: u32, s: u32, inLk: bool) -> u32 {
    let a = min(32u * t, s);
    let e = min(a + 32u, s);
    var c = 0u;
    for (var p = a; p < e; p = p + 4u) {
        var w: u32;
        if (inLk) { w = atomicLoad(&lk[p >> 2u]); } else { w = pages[pbase + (p >> 2u)]; }
        let nb = min(e - p, 4u) * 8u; // the bits of the piece in this word
        if (nb < 32u) { w = w & ((1u << nb) - 1u); }
        c = c ^ w;
        for (var k = 0u; k < nb; k = k + 1u) {
            c = (c >> 1u) ^ (CRC_POLY & (0u - (c & 1u)));
        }
    }
    var v = 0u;
    if (a < e) { v = crcShift(c, s - e); }
    if (t == 0u) { v = v ^ crcShift(0xffffffffu, s); }
    atomicXor(&crcAcc, v);
    workgroupBarrier();
    return ~atomicLoad(&crcAcc);
}
