# A live PyTorch process for `s4d bench --from-pid`, printing "ready" once
# its memory is in place, then sleeping until killed. argv[1] "heap": a
# resnet18 after a forward pass of 16 images, as dumppages.py (mostly
# zero and pointer pages; the process issue 29's figures came from);
# "acts": the outputs of every layer for 48 images kept as well (~1.3 GiB
# of float activations, ratio ~1.25).
import sys, time, torch, torchvision
mode = sys.argv[1] if len(sys.argv) > 1 else "heap"
m = torchvision.models.resnet18()
keep = []
if mode == "acts":
    for mod in m.modules():
        if len(list(mod.children())) == 0:
            mod.register_forward_hook(lambda _m, _i, o: keep.append(o))
x = torch.randn(48 if mode == "acts" else 16, 3, 224, 224)
with torch.no_grad():
    y = m(x)
words = [str(i) * 10 for i in range(200000)]
print("ready", mode, sum(t.numel() * t.element_size() for t in keep) >> 20, "MiB kept", flush=True)
while True:
    time.sleep(60)
