# A live PyTorch process for `s4d bench --from-pid`: a resnet18, the
# outputs of every layer for a batch of 48 images (kept by forward hooks),
# the interpreter heap; about 1.3 GiB of private memory. Prints "ready"
# once it is all there, then sleeps until killed.
import sys, time, torch, torchvision
m = torchvision.models.resnet18()
keep = []
for mod in m.modules():
    if len(list(mod.children())) == 0:
        mod.register_forward_hook(lambda _m, _i, o: keep.append(o))
x = torch.randn(int(sys.argv[1]) if len(sys.argv) > 1 else 48, 3, 224, 224)
with torch.no_grad():
    y = m(x)
words = [str(i) * 10 for i in range(200000)]
print("ready", sum(t.numel() * t.element_size() for t in keep) >> 20, "MiB of activations", flush=True)
while True:
    time.sleep(60)
