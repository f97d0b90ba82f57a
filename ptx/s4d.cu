// s4d's CUDA kernels, around nvCOMP's batched compressors. Compiled to PTX
// (make ptx) and JIT-compiled by the driver at load time, so one committed
// file serves every GPU from compute capability 7.5 up.
//
// Every parameter is 8 bytes wide: the host launches them through one
// generic trampoline that passes an array of uint64 values.

typedef unsigned long long u64;
typedef unsigned int u32;
typedef unsigned char u8;

#define FULL 0xffffffffu

enum { CLASS_NEED = 0, CLASS_ZERO = 1, CLASS_SAME = 2, CLASS_LZ4 = 3, CLASS_ZSTD = 4, CLASS_RAW = 5 };

// s4d_classify: one warp per page. A page is zero or same-filled when every
// 8-byte word equals the first (zram's rule). Writes the class, the fill
// word and a 0/1 flag for the pages that still need compressing.
extern "C" __global__ void s4d_classify(const ulonglong2 *pages, u64 pairs_per_page, u64 n,
                                        u8 *cls, u64 *fill, u32 *need)
{
    u64 page = (blockIdx.x * (u64)blockDim.x + threadIdx.x) >> 5;
    int lane = threadIdx.x & 31;
    if (page >= n)
        return; // the whole warp leaves together: page is uniform in a warp
    const ulonglong2 *p = pages + page * pairs_per_page;
    u64 first = p[0].x;
    bool same = true;
    for (u64 w = lane; w < pairs_per_page; w += 32) {
        ulonglong2 v = p[w];
        same &= (v.x == first) & (v.y == first);
    }
    same = __all_sync(FULL, same);
    if (lane == 0) {
        cls[page] = same ? (first == 0 ? CLASS_ZERO : CLASS_SAME) : CLASS_NEED;
        fill[page] = same ? first : 0;
        need[page] = same ? 0 : 1;
    }
}

// s4d_scan: exclusive prefix sum of n values, each first rounded up to a
// multiple of align (a power of two); out[n] receives the total. One block
// walks the array in tiles: batches are at most a few thousand pages, so a
// single block is not the bottleneck and needs no inter-block protocol.
extern "C" __global__ void s4d_scan(const u32 *in, u32 *out, u64 n, u64 align)
{
    __shared__ u32 warpsum[32];
    __shared__ u32 carry;
    int lane = threadIdx.x & 31, wid = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
    u32 mask = ~((u32)align - 1);
    if (threadIdx.x == 0)
        carry = 0;
    __syncthreads();
    for (u64 base = 0; base < n; base += blockDim.x) {
        u64 i = base + threadIdx.x;
        u32 v = i < n ? ((in[i] + (u32)align - 1) & mask) : 0;
        u32 x = v;
        for (int d = 1; d < 32; d <<= 1) {
            u32 y = __shfl_up_sync(FULL, x, d);
            if (lane >= d)
                x += y;
        }
        if (lane == 31)
            warpsum[wid] = x;
        __syncthreads();
        if (wid == 0) {
            u32 s = lane < nwarps ? warpsum[lane] : 0;
            for (int d = 1; d < 32; d <<= 1) {
                u32 y = __shfl_up_sync(FULL, s, d);
                if (lane >= d)
                    s += y;
            }
            warpsum[lane] = s;
        }
        __syncthreads();
        u32 excl = carry + (wid ? warpsum[wid - 1] : 0) + x - v;
        if (i < n)
            out[i] = excl;
        __syncthreads();
        if (threadIdx.x == blockDim.x - 1)
            carry = excl + v;
        __syncthreads();
    }
    if (threadIdx.x == 0)
        out[n] = carry;
}

// s4d_build: nvCOMP's input pointer/size and output pointer arrays, packed
// so that chunk k is the k-th page needing compression (pos is the
// exclusive scan of need). The host passes n chunks without reading back
// how many pages need compressing; the entries past that count become
// 8-byte dummies whose results are never read.
extern "C" __global__ void s4d_build(u64 n, const u32 *need, const u32 *pos, u64 din, u64 page_size,
                                     u64 dout, u64 stride, u64 *in_ptr, u64 *in_size, u64 *out_ptr)
{
    u64 i = blockIdx.x * (u64)blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    u32 m = pos[n];
    if (need[i]) {
        u32 k = pos[i];
        in_ptr[k] = din + i * page_size;
        in_size[k] = page_size;
        out_ptr[k] = dout + k * stride;
    }
    if (i >= m) {
        in_ptr[i] = din;
        in_size[i] = 8;
        out_ptr[i] = dout + i * stride;
    }
}

// s4d_finalize: per page, turn nvCOMP's status and size into a class and
// a stored size. Compressed sizes over the threshold, and chunks nvCOMP
// declined (nvcompErrorCannotCompress, 19), become raw; any other status
// is recorded in *err and the host fails the whole batch.
extern "C" __global__ void s4d_finalize(u64 n, u8 *cls, const u32 *need, const u32 *pos, const u64 *out_size,
                                        const int *status, u64 threshold, u64 codec_class, u32 *psize, u32 *err)
{
    u64 i = blockIdx.x * (u64)blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    u32 sz = 0;
    if (need[i]) {
        u32 k = pos[i];
        int st = status[k];
        u64 s = out_size[k];
        if (st == 0 && s > 0 && s <= threshold) {
            cls[i] = (u8)codec_class;
            sz = (u32)s;
        } else {
            cls[i] = CLASS_RAW;
            if (st != 0 && st != 19)
                atomicCAS(err, 0u, (u32)st);
        }
    }
    psize[i] = sz;
}

// s4d_fixup: one thread per compressed page makes nvCOMP's output what
// every decoder accepts, before packing.
//
// LZ4: nvCOMP leaves a non-zero match-length nibble in the token of the
// final, literals-only sequence. liblz4 ignores it; stricter decoders
// (pierrec/lz4) reject the block. The walk clears it, and checks the whole
// block on the way: sequences in bounds, offsets inside the page, exactly
// one page decoded, the end-of-block rules (last match starts at least 12
// bytes before the end, at least 5 literals close the block). A block that
// fails any check is stored raw.
//
// zstd: nvCOMP's frames declare a 1 MiB window for a page-sized frame;
// decoders that cap their window (as a page store should) refuse them. No
// match can reach before the frame's start, so the smallest power-of-two
// window holding a page (at least 1 KiB) is equivalent: it is written in.
extern "C" __global__ void s4d_fixup(u64 n, u8 *cls, const u32 *pos, u32 *psize, u64 dout, u64 stride,
                                     u64 page_size)
{
    u64 i = blockIdx.x * (u64)blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    u32 sz = psize[i];
    if (sz == 0)
        return;
    u8 *p = (u8 *)(dout + (u64)pos[i] * stride);
    bool ok = false;
    if (cls[i] == CLASS_LZ4) {
        u64 si = 0, di = 0, last_match = 0, lit = 0;
        bool any_match = false;
        while (si < sz) {
            u64 tokpos = si;
            u32 tok = p[si++];
            lit = tok >> 4;
            if (lit == 15) {
                u32 x;
                do {
                    if (si >= sz)
                        goto done;
                    x = p[si++];
                    lit += x;
                } while (x == 255);
            }
            si += lit;
            di += lit;
            if (si > sz || di > page_size)
                goto done;
            if (si == sz) {
                p[tokpos] = (u8)(tok & 0xf0);
                ok = di == page_size && lit >= 5 && (!any_match || last_match + 12 <= page_size);
                goto done;
            }
            if (si + 2 > sz)
                goto done;
            u32 off = p[si] | ((u32)p[si + 1] << 8);
            si += 2;
            u64 ml = tok & 15;
            if (ml == 15) {
                u32 x;
                do {
                    if (si >= sz)
                        goto done;
                    x = p[si++];
                    ml += x;
                } while (x == 255);
            }
            ml += 4;
            if (off == 0 || off > di)
                goto done;
            any_match = true;
            last_match = di;
            di += ml;
            if (di > page_size)
                goto done;
        }
    } else if (cls[i] == CLASS_ZSTD) {
        u32 magic = p[0] | ((u32)p[1] << 8) | ((u32)p[2] << 16) | ((u32)p[3] << 24);
        if (sz < 6 || magic != 0xFD2FB528u)
            goto done;
        u32 fhd = p[4];
        ok = true;
        if (!(fhd & 0x20)) { // not single-segment: a window descriptor follows
            u32 wlog = 10;
            while ((1ull << wlog) < page_size)
                wlog++;
            u32 wd = p[5], exp = wd >> 3, mant = wd & 7;
            u64 base = 1ull << (10 + exp), window = base + (base >> 3) * mant;
            if (window > (1ull << wlog))
                p[5] = (u8)((wlog - 10) << 3);
        }
    } else {
        ok = true;
    }
done:
    if (!ok) {
        cls[i] = CLASS_RAW;
        psize[i] = 0;
    }
}

// s4d_gather: one warp per page copies its compressed bytes to their packed
// offset, 8 bytes a lane. Offsets are multiples of 8 (the scan rounds sizes
// up) and output slots are 8-aligned and padded, so whole words are safe.
extern "C" __global__ void s4d_gather(u64 n, const u32 *pos, const u32 *psize, const u32 *offs,
                                      u64 dout, u64 stride, u64 packed)
{
    u64 page = (blockIdx.x * (u64)blockDim.x + threadIdx.x) >> 5;
    int lane = threadIdx.x & 31;
    if (page >= n)
        return;
    u32 sz = psize[page];
    if (sz == 0)
        return;
    const u64 *src = (const u64 *)(dout + (u64)pos[page] * stride);
    u64 *dst = (u64 *)(packed + offs[page]);
    u32 words = (sz + 7) / 8;
    for (u32 w = lane; w < words; w += 32)
        dst[w] = src[w];
}

// s4d_lz4: our LZ4 compressor for pages of up to 4 KiB, one block of four
// warps per page, the algorithm of backends/pagelz4 (which must give the
// same bytes): hash chains over every position of the page, the longest of
// up to LZ4_DEPTH candidates per position (lengths compared capped at
// LZ4_CAP), a match put off by one byte when the next position's is
// longer, then a parse that jumps from match start to match start. The
// chains are built by one warp (positions in order), the matches of all
// positions by the four, the parse by one; the block is built in shared
// memory and copied out only if it fits the threshold, otherwise the page
// is raw. It keeps LZ4's end-of-block rules.
#define LZ4_THREADS 128
#define LZ4_HASH_BITS 11
#define LZ4_DEPTH 6
#define LZ4_CAP 19
#define LZ4_NONE 0xffffu

struct __align__(16) lz4_block {
    u32 page[1024 + 4];        // the page, plus zero words so 4-byte loads near the end stay inside
    unsigned short link[4096]; // chain links; then each position's best match, (len-4)<<12 | offset
    unsigned short head[2048]; // chain heads; then the output block
    u32 sel[128];              // positions where a match starts, one bit each
    unsigned short nxt[129];   // nxt[i]: the first match start in sel words i and up
};

__device__ __forceinline__ u32 lz4_load32(const u32 *page, u32 i)
{
    return __funnelshift_r(page[i >> 2], page[(i >> 2) + 1], (i & 3) * 8);
}

__device__ __forceinline__ u32 lz4_len(u32 e) { return (e & 0xfff) ? (e >> 12) + 4 : 0; }

// lz4_lenbytes writes the extra length bytes of v (>= 0) at o, 255s by all
// lanes, and returns the position after them.
__device__ __forceinline__ u32 lz4_lenbytes(u8 *ob, u32 o, u32 v, int lane)
{
    u32 k = v / 255;
    for (u32 j = lane; j < k; j += 32)
        ob[o + j] = 255;
    if (lane == 0)
        ob[o + k] = (u8)(v - k * 255);
    return o + k + 1;
}

__device__ __forceinline__ u32 lz4_need(u32 ll, u32 ml)
{
    u32 need = 1 + ll + (ll >= 15 ? (ll - 15) / 255 + 1 : 0);
    if (ml)
        need += 2 + (ml - 4 >= 15 ? (ml - 19) / 255 + 1 : 0);
    return need;
}

// lz4_emit writes one sequence (a match unless ml is 0) at di, literals
// copied by all lanes, and returns the position after it.
__device__ u32 lz4_emit(u8 *ob, u32 di, const u8 *src, u32 anchor, u32 ll, u32 off, u32 ml, int lane)
{
    u32 tok = (min(ll, 15u) << 4) | (ml ? min(ml - 4, 15u) : 0);
    if (lane == 0)
        ob[di] = (u8)tok;
    u32 o = di + 1;
    if (ll >= 15)
        o = lz4_lenbytes(ob, o, ll - 15, lane);
    for (u32 j = lane; j < ll; j += 32)
        ob[o + j] = src[anchor + j];
    o += ll;
    if (ml) {
        if (lane == 0) {
            ob[o] = (u8)off;
            ob[o + 1] = (u8)(off >> 8);
        }
        o += 2;
        if (ml - 4 >= 15)
            o = lz4_lenbytes(ob, o, ml - 19, lane);
    }
    __syncwarp();
    return o;
}

extern "C" __global__ void __launch_bounds__(LZ4_THREADS)
s4d_lz4(u64 n, u8 *cls, const u32 *pos, u64 din, u64 page_size, u64 dout, u64 stride, u64 threshold, u32 *psize)
{
    __shared__ lz4_block w;
    const int t = threadIdx.x, lane = t & 31, warp = t >> 5;
    const u64 page = blockIdx.x;
    if (page >= n)
        return;
    if (cls[page] != CLASS_NEED) { // uniform in the block
        if (t == 0)
            psize[page] = 0;
        return;
    }
    const u32 ps = (u32)page_size;
    const u8 *src = (const u8 *)w.page;
    const uint4 *in = (const uint4 *)(din + page * page_size);
    for (u32 j = t; j < ps / 16; j += LZ4_THREADS)
        ((uint4 *)w.page)[j] = in[j];
    if (t < 4)
        w.page[ps / 4 + t] = 0;
    for (u32 j = t; j < (1u << LZ4_HASH_BITS) / 2; j += LZ4_THREADS)
        ((u32 *)w.head)[j] = 0xffffffffu;
    __syncthreads();

    // Chains, in position order: prev is the nearest earlier position with
    // the same hash; within a round of 32 the nearest lower lane's.
    if (warp == 0) {
        for (u32 base = 0; base + 4 <= ps; base += 32) {
            u32 p = base + lane;
            bool valid = p + 4 <= ps;
            u32 h = valid ? (lz4_load32(w.page, p) * 2654435761u) >> (32 - LZ4_HASH_BITS) : 0x10000u + lane;
            u32 m = __match_any_sync(FULL, h);
            u32 lower = m & ((1u << lane) - 1);
            u32 pv = 0;
            if (valid)
                pv = lower ? base + 31 - __clz(lower) : w.head[h];
            __syncwarp();
            if (valid) {
                w.link[p] = (unsigned short)pv;
                if ((m >> lane) == 1)
                    w.head[h] = (unsigned short)p;
            }
            __syncwarp();
        }
    }
    __syncthreads();

    // Best match at each position where one may start. Rounds go from the
    // end of the page down, so a position's result can replace its link:
    // chains only lead to lower positions, which later rounds still read.
    const int last = (int)ps - 12;
    for (int base = last / LZ4_THREADS * LZ4_THREADS; last >= 0 && base >= 0; base -= LZ4_THREADS) {
        int p = base + t;
        u32 e = 0;
        if (p <= last) {
            // The position's own bytes, up to the cap, stay in registers.
            u32 v[(LZ4_CAP + 3) / 4];
#pragma unroll
            for (int k = 0; k < (LZ4_CAP + 3) / 4; k++)
                v[k] = lz4_load32(w.page, p + 4 * k);
            u32 limit = min(ps - 5 - (u32)p, (u32)LZ4_CAP);
            u32 best = 0, boff = 0, q = w.link[p];
            for (int d = 0; d < LZ4_DEPTH && q != LZ4_NONE && best < limit; d++) {
                if (lz4_load32(w.page, q) == v[0]) {
                    u32 l = 4;
#pragma unroll
                    for (int k = 1; k < (LZ4_CAP + 3) / 4; k++) {
                        if (l >= limit)
                            break;
                        u32 x = lz4_load32(w.page, q + 4 * k) ^ v[k];
                        if (x) {
                            l += (__ffs(x) - 1) >> 3;
                            break;
                        }
                        l += 4;
                    }
                    l = min(l, limit);
                    if (l > best) {
                        best = l;
                        boff = p - q;
                    }
                }
                q = w.link[q];
            }
            e = best ? (best - 4) << 12 | boff : 0;
        }
        __syncthreads();
        if (p <= last)
            w.link[p] = (unsigned short)e;
        __syncthreads();
    }

    // Match starts: a match, not beaten by the next position's.
    for (u32 wi = warp; wi < 128; wi += LZ4_THREADS / 32) {
        int p = wi * 32 + lane;
        bool s = false;
        if (p <= last) {
            u32 b = lz4_len(w.link[p]);
            u32 b1 = p + 1 <= last ? lz4_len(w.link[p + 1]) : 0;
            s = b >= 4 && b1 <= b;
        }
        u32 bits = __ballot_sync(FULL, s);
        if (lane == 0)
            w.sel[wi] = bits;
    }
    __syncthreads();
    if (warp != 0)
        return;

    // nxt: for each word of sel, the first match start in it or above.
    {
        u32 f[4], m = LZ4_NONE;
        for (int k = 0; k < 4; k++) {
            u32 wi = lane * 4 + k, bits = w.sel[wi];
            f[k] = bits ? wi * 32 + __ffs(bits) - 1 : LZ4_NONE;
            m = min(m, f[k]);
        }
        for (int d = 1; d < 32; d <<= 1) {
            u32 o = __shfl_down_sync(FULL, m, d);
            if (lane + d < 32)
                m = min(m, o);
        }
        u32 run = __shfl_down_sync(FULL, m, 1);
        if (lane == 31)
            run = LZ4_NONE;
        for (int k = 3; k >= 0; k--) {
            if (f[k] != LZ4_NONE)
                run = f[k];
            w.nxt[lane * 4 + k] = (unsigned short)run;
        }
        if (lane == 0)
            w.nxt[128] = LZ4_NONE;
    }
    __syncwarp();

    // Parse and emit; every lane of the warp follows the same path.
    u8 *ob = (u8 *)w.head;
    u32 cap = (u32)min(threshold, (u64)sizeof(w.head));
    u32 di = 0, anchor = 0, cur = 0;
    bool ok = true;
    while ((int)cur <= last) {
        u32 wi = cur >> 5, bits = w.sel[wi] & (0xffffffffu << (cur & 31));
        u32 p = bits ? wi * 32 + __ffs(bits) - 1 : w.nxt[wi + 1];
        if (p == LZ4_NONE)
            break;
        u32 e = w.link[p], off = e & 0xfff, ml = lz4_len(e);
        if (ml == LZ4_CAP) {
            for (;;) {
                u32 i = p + ml + lane;
                bool diff = i >= ps - 5 || src[i] != src[i - off];
                u32 b = __ballot_sync(FULL, diff);
                if (b) {
                    ml += __ffs(b) - 1;
                    break;
                }
                ml += 32;
            }
        }
        u32 ll = p - anchor;
        if (di + lz4_need(ll, ml) > cap) {
            ok = false;
            break;
        }
        di = lz4_emit(ob, di, src, anchor, ll, off, ml, lane);
        cur = anchor = p + ml;
    }
    if (ok) {
        u32 ll = ps - anchor;
        if (di + lz4_need(ll, 0) > cap)
            ok = false;
        else
            di = lz4_emit(ob, di, src, anchor, ll, 0, 0, lane);
    }
    if (ok) {
        u32 *dst = (u32 *)(dout + (u64)pos[page] * stride);
        for (u32 j = lane; j < (di + 3) / 4; j += 32)
            dst[j] = ((const u32 *)ob)[j];
    }
    if (lane == 0) {
        cls[page] = ok ? CLASS_LZ4 : CLASS_RAW;
        psize[page] = ok ? di : 0;
    }
}

// s4d_crc and s4d_unpack: in s4d_read.cuh, part of this translation unit.
#include "s4d_read.cuh"
#include "s4d_place.cuh"
