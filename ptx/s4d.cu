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
