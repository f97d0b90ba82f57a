// The kernels of s4d.cu that read what the store keeps: the checksums
// computed on the GPU (s4d_crc) and the LZ4 decoder (s4d_unpack). Included
// by s4d.cu, so `make ptx` compiles one translation unit as before.

// s4d_crc: one thread per page, the CRC-32C (Castagnoli, reflected) of
// what the store keeps for it, which it checks on every read: the fill word
// of a same-filled page, the page itself when raw, the compressed bytes
// otherwise. Computed here, the host does not read those bytes again.
extern "C" __global__ void s4d_crc(u64 n, const u8 *cls, const u64 *fill, const u32 *pos, const u32 *psize,
                                   u64 din, u64 page_size, u64 dout, u64 stride, u32 *sums)
{
    __shared__ u32 tab[256];
    for (u32 i = threadIdx.x; i < 256; i += blockDim.x) {
        u32 c = i;
        for (int k = 0; k < 8; k++)
            c = (c >> 1) ^ (0x82F63B78u & (0u - (c & 1)));
        tab[i] = c;
    }
    __syncthreads();
    u64 i = blockIdx.x * (u64)blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    u32 crc = 0xffffffffu, len;
    const u32 *w;
    switch (cls[i]) {
    case CLASS_ZERO:
        sums[i] = 0;
        return;
    case CLASS_SAME: {
        u64 v = fill[i];
        for (int k = 0; k < 8; k++, v >>= 8)
            crc = tab[(crc ^ (u32)v) & 0xff] ^ (crc >> 8);
        sums[i] = ~crc;
        return;
    }
    case CLASS_RAW:
        w = (const u32 *)(din + i * page_size);
        len = (u32)page_size;
        break;
    default:
        w = (const u32 *)(dout + (u64)pos[i] * stride);
        len = psize[i];
    }
    for (u32 j = 0; j < len / 4; j++) {
        crc ^= w[j];
        crc = tab[crc & 0xff] ^ (crc >> 8);
        crc = tab[crc & 0xff] ^ (crc >> 8);
        crc = tab[crc & 0xff] ^ (crc >> 8);
        crc = tab[crc & 0xff] ^ (crc >> 8);
    }
    u32 tail = len & 3;
    if (tail) {
        u32 v = w[len / 4];
        for (u32 k = 0; k < tail; k++, v >>= 8)
            crc = tab[(crc ^ v) & 0xff] ^ (crc >> 8);
    }
    sums[i] = ~crc;
}

// s4d_unpack: one warp per page decodes the LZ4 block of page i, psize[i]
// bytes at packed + offs[i] (8-aligned, readable up to the next multiple
// of 8), into out + i*page_size. The page is built in shared memory with
// every read and write bounds-checked, so a damaged block is reported and
// never faults: status[i] is 0 when the block decoded to exactly one page,
// 1 when not (the page's place is then zeroed). With cls set, the pages
// of the other classes are written here too (zero; same-filled, its 8-byte
// word at packed + offs[i]; raw, the page there), so that a batch going
// into registered memory comes back whole with no work on the host. The
// block is read from global memory (all lanes read the same byte: one
// transaction), which keeps shared memory to a page per warp.
#define UNPACK_WARPS 8
#define UNPACK_MAX 4096

// unpack_len adds LZ4's extra length bytes at *si to v; false when the
// block ends first.
__device__ bool unpack_len(const u8 *sb, u32 len, u32 *si, u32 *v)
{
    u32 b;
    do {
        if (*si >= len)
            return false;
        b = __ldg(sb + (*si)++);
        *v += b;
    } while (b == 255);
    return true;
}

extern "C" __global__ void s4d_unpack(u64 n, const u32 *offs, const u32 *psize, u64 packed, u64 out,
                                      u64 page_size, u32 *status, const u8 *cls)
{
    __shared__ u64 dbuf[UNPACK_WARPS][UNPACK_MAX / 8]; // the page being decoded
    u32 lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    u64 i = blockIdx.x * (u64)UNPACK_WARPS + w;
    if (i >= n)
        return;
    u64 *dst = (u64 *)(out + i * page_size);
    u32 words = (u32)(page_size / 8), len = psize[i];
    u8 c = cls ? cls[i] : (u8)CLASS_LZ4;
    if (c != CLASS_LZ4) {
        const u64 *src = (const u64 *)(packed + offs[i]);
        bool ok = c == CLASS_ZERO || (c == CLASS_SAME && len == 8) || (c == CLASS_RAW && len == page_size);
        u64 v = ok && c == CLASS_SAME ? src[0] : 0;
        for (u32 k = lane; k < words; k += 32)
            dst[k] = ok && c == CLASS_RAW ? src[k] : v;
        if (lane == 0)
            status[i] = ok ? 0 : 1;
        return;
    }
    if (len == 0 || len > page_size || page_size > UNPACK_MAX) {
        for (u32 k = lane; k < words; k += 32)
            dst[k] = 0;
        if (lane == 0)
            status[i] = 1;
        return;
    }
    // Every lane walks the sequences; the lanes share each copy.
    const u8 *sb = (const u8 *)(packed + offs[i]);
    u8 *db = (u8 *)dbuf[w];
    u32 ps = (u32)page_size, si = 0, di = 0;
    bool ok = false;
    while (si < len) {
        u32 tok = __ldg(sb + si++), lit = tok >> 4;
        if (lit == 15 && !unpack_len(sb, len, &si, &lit))
            break;
        if (lit > len - si || lit > ps - di)
            break;
        for (u32 k = lane; k < lit; k += 32)
            db[di + k] = __ldg(sb + si + k);
        si += lit;
        di += lit;
        if (si == len) { // the last sequence holds literals only
            ok = di == ps;
            break;
        }
        if (len - si < 2)
            break;
        u32 off = __ldg(sb + si) | (u32)__ldg(sb + si + 1) << 8, ml = tok & 15;
        si += 2;
        if (off == 0 || off > di)
            break;
        if (ml == 15 && !unpack_len(sb, len, &si, &ml))
            break;
        ml += 4;
        if (ml > ps - di)
            break;
        __syncwarp();
        if (off >= 32) {
            // Each round of 32 bytes reads at least 32 back: bytes of
            // earlier rounds at the latest.
            for (u32 base = 0; base < ml; base += 32) {
                u32 k = base + lane;
                if (k < ml)
                    db[di + k] = db[di + k - off];
                __syncwarp();
            }
        } else {
            // A short offset repeats the off bytes before di: byte k is
            // byte k mod off of them, the residue kept without dividing
            // in the loop.
            u32 m = lane % off, step = 32 % off;
            for (u32 k = lane; k < ml; k += 32) {
                db[di + k] = db[di - off + m];
                m += step;
                if (m >= off)
                    m -= off;
            }
        }
        __syncwarp();
        di += ml;
    }
    __syncwarp();
    // A page that failed comes out as zeros: what the output buffer held
    // before (another batch's pages) must not reach this caller.
    for (u32 k = lane; k < words; k += 32)
        dst[k] = ok ? dbuf[w][k] : 0;
    if (lane == 0)
        status[i] = ok ? 0 : 1;
}
