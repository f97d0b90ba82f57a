"""build_dist.py OUTDIR: the package's sdist and wheel, built through the PEP
517 hooks of its build backend (setuptools) in this interpreter: offline,
no isolated environment to download. Built from a copy of the sources with
the project's LICENSE beside them, so neither build litters the tree."""

import os
import shutil
import sys
import tempfile

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main():
    out = os.path.abspath(sys.argv[1])
    os.makedirs(out, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "s4d")
        shutil.copytree(HERE, src, ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "build", "dist", "*.egg-info"))
        shutil.copy(os.path.join(HERE, "..", "..", "LICENSE"), src)
        os.chdir(src)
        sys.path.insert(0, src)
        from setuptools import build_meta as backend
        for what, hook in (("sdist", backend.build_sdist), ("wheel", backend.build_wheel)):
            name = hook(out)
            print(f"{what}: {os.path.join(out, name)}")


if __name__ == "__main__":
    main()
