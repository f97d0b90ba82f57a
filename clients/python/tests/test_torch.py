"""PyTorch tensors parked and restored bit for bit (runs where torch is
importable: PyPI's Linux torch wheels need the CUDA runtime, about 3 GB,
so CI skips it and the GPU host runs it)."""

import os
import unittest

import s4d

SOCKET = os.environ.get("S4D_SOCKET", "")
try:
    import torch
except ImportError:
    torch = None


@unittest.skipUnless(SOCKET, "S4D_SOCKET names no daemon")
@unittest.skipIf(torch is None, "torch is not importable (PyPI's Linux wheels need the CUDA runtime)")
class Tensors(unittest.TestCase):
    def setUp(self):
        self.c = s4d.Client(SOCKET)
        self.addCleanup(self.c.close)

    def same(self, a, b):
        self.assertIsInstance(b, torch.Tensor)
        self.assertEqual((a.dtype, a.shape), (b.dtype, b.shape))
        self.assertTrue(torch.equal(a.reshape(-1).view(torch.uint8) if a.numel() else a,
                                    b.reshape(-1).view(torch.uint8) if b.numel() else b))

    def test_dtypes_and_shapes(self):
        g = torch.Generator().manual_seed(1)
        cases = [torch.randn(3, 5, 7, generator=g).to(torch.bfloat16),
                 torch.randn(1000, 333, generator=g),
                 torch.randn(64, generator=g).to(torch.float16),
                 torch.arange(10000, dtype=torch.int64).reshape(100, 100)[:, ::3],  # not contiguous
                 torch.tensor([True, False, True]),
                 torch.zeros(0, 4, dtype=torch.bfloat16),
                 torch.tensor(2.5, dtype=torch.float64)]
        for i, t in enumerate(cases):
            self.c.park(f"pt-{i}", t)
            self.same(t.contiguous(), self.c.restore(f"pt-{i}", keep=True))
            out = torch.empty_like(t.contiguous())
            self.assertIs(self.c.restore(f"pt-{i}", out=out), out)
            self.same(t.contiguous(), out)

    def test_read_in_place(self):
        # A contiguous tensor is read where it lies: the header records a
        # tensor and nothing was converted through NumPy (bfloat16 has no
        # NumPy dtype at all).
        t = torch.full((4096,), 1.5, dtype=torch.bfloat16)
        h = self.c.park("pt-inplace", t)
        self.assertEqual((h.meta["kind"], h.meta["dtype"]), ("torch", "bfloat16"))

    def test_refusals(self):
        if torch.cuda.is_available():
            with self.assertRaises(TypeError) as cm:
                self.c.park("pt-cuda", torch.ones(4, device="cuda"))
            self.assertIn(".cpu()", str(cm.exception))
        with self.assertRaises(TypeError) as cm:
            self.c.park("pt-meta", torch.ones(4, device="meta"))
        self.assertIn(".cpu()", str(cm.exception))
        self.c.park("pt-shape", torch.ones(2, 3))
        with self.assertRaises(ValueError):
            self.c.restore("pt-shape", out=torch.ones(3, 2))

    def test_optimizer_state_round_trip(self):
        # The guide's example: an optimizer's state offloaded and brought
        # back bit for bit.
        model = torch.nn.Linear(256, 128)
        opt = torch.optim.AdamW(model.parameters())
        model(torch.randn(8, 256)).sum().backward()
        opt.step()
        state = {(i, k): v.clone() for i, s in enumerate(opt.state.values()) for k, v in s.items()
                 if torch.is_tensor(v)}
        for i, s in enumerate(opt.state.values()):
            for k, v in s.items():
                if torch.is_tensor(v):
                    self.c.park(f"pt-opt-{i}-{k}", v)
                    s[k] = None  # dropped: the memory is free
        for i, s in enumerate(opt.state.values()):
            for k in list(s):
                if s[k] is None:
                    s[k] = self.c.restore(f"pt-opt-{i}-{k}")
        for (i, k), v in state.items():
            self.same(v, list(opt.state.values())[i][k])
        model(torch.randn(8, 256)).sum().backward()
        opt.step()  # the restored state works


if __name__ == "__main__":
    unittest.main()
