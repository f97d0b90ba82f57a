"""The CUDA reference beside vkprobe, same process shape: a sealed-size
memfd of 1 GiB mapped, registered with cudaHostRegister (as the cuda
engine registers client mappings), copied to and from the GPU in 16 MiB
batches on one stream, several in flight. GB/s and the process's CPU
seconds per GB (getrusage, every thread), medians of 5 passes."""
import mmap, os, resource, statistics, time
import torch

N = int(os.environ.get("SIZE_MIB", "1024")) << 20
B = 16 << 20


def cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


fd = os.memfd_create("s4d-cudaref")
os.ftruncate(fd, N)
m = mmap.mmap(fd, N)
h = torch.frombuffer(m, dtype=torch.uint8)
h.fill_(7)
rt = torch.cuda.cudart()
err = rt.cudaHostRegister(h.data_ptr(), N, 0)
print("cudaHostRegister(memfd)", err)
d = torch.empty(N, dtype=torch.uint8, device="cuda")
s = torch.cuda.Stream()
for name, up in (("up", True), ("down", False)):
    g, c = [], []
    for i in range(6):
        torch.cuda.synchronize()
        t0, c0 = time.perf_counter(), cpu()
        with torch.cuda.stream(s):
            for o in range(0, N, B):
                if up:
                    d[o:o + B].copy_(h[o:o + B], non_blocking=True)
                else:
                    h[o:o + B].copy_(d[o:o + B], non_blocking=True)
        s.synchronize()
        t, cs = time.perf_counter() - t0, cpu() - c0
        if i:
            g.append(N / t / 1e9)
            c.append(cs / (N / 1e9))
    print(f"cuda registered-memfd dir={name} batch_mib=16 GBps_med={statistics.median(g):.2f} "
          f"GBps_min={min(g):.2f} GBps_max={max(g):.2f} core_s_per_GB_med={statistics.median(c):.4f}")
ok = bool((h[:1 << 20] == 7).all())
print("cudaref data", "ok" if ok else "MISMATCH")
