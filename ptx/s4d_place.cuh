// The store's side of the GPU path: s4d_place writes compressed pages
// straight into the store's memory. Included by s4d.cu.

// s4d_place: one warp per page writes what the store keeps for it, its
// CRC-32C (4 bytes, little-endian) then its stored bytes, to dst[i]: the
// page's slot in the store's slabs, which are registered with the GPU, so
// the bytes cross PCIe once and the host copies nothing. dst[i] is 0 for a
// page with nothing to keep (zero, or refused by the store) and 4-aligned
// otherwise; the bytes past the last whole word are written one at a time,
// so nothing beyond the object is touched. The sources are those of s4d_crc.
extern "C" __global__ void s4d_place(u64 n, const u8 *cls, const u64 *fill, const u32 *pos, const u32 *psize,
                                     u64 din, u64 page_size, u64 dout, u64 stride, const u32 *sums,
                                     const u64 *dst)
{
    u64 page = (blockIdx.x * (u64)blockDim.x + threadIdx.x) >> 5;
    int lane = threadIdx.x & 31;
    if (page >= n)
        return;
    u64 d = dst[page];
    u8 c = cls[page];
    if (d == 0 || c == CLASS_ZERO)
        return;
    u32 *o = (u32 *)d;
    if (c == CLASS_SAME) {
        if (lane == 0) {
            u64 v = fill[page];
            o[0] = sums[page];
            o[1] = (u32)v;
            o[2] = (u32)(v >> 32);
        }
        return;
    }
    const u32 *src;
    u32 len;
    if (c == CLASS_RAW) {
        src = (const u32 *)(din + page * page_size);
        len = (u32)page_size;
    } else {
        src = (const u32 *)(dout + (u64)pos[page] * stride);
        len = psize[page];
    }
    if (lane == 0)
        o[0] = sums[page];
    u32 words = len / 4;
    for (u32 w = lane; w < words; w += 32)
        o[1 + w] = src[w];
    if (lane < (len & 3))
        ((u8 *)(o + 1 + words))[lane] = ((const u8 *)(src + words))[lane];
}

// s4d_fetch: one warp per page copies the stored bytes of page i, size[i]
// of them at src[i], to packed + offs[i] (8-aligned), where s4d_unpack
// reads them. src[i] lies in the store's registered slabs, read across
// PCIe by the kernel, so the host packs nothing; it is 4-aligned and
// readable up to the next multiple of 4. A page with src[i] 0 is left to
// the host (its bytes were uploaded with the rest).
extern "C" __global__ void s4d_fetch(u64 n, const u64 *src, const u32 *size, const u32 *offs, u64 packed)
{
    u64 page = (blockIdx.x * (u64)blockDim.x + threadIdx.x) >> 5;
    int lane = threadIdx.x & 31;
    if (page >= n)
        return;
    u32 sz = size[page];
    const u32 *s = (const u32 *)src[page];
    if (sz == 0 || s == 0)
        return;
    u32 *d = (u32 *)(packed + offs[page]);
    u32 words = (sz + 3) / 4;
    for (u32 w = lane; w < words; w += 32)
        d[w] = s[w];
}
