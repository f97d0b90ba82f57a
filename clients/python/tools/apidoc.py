"""apidoc.py: the Python client's API reference, in Markdown, from its
docstrings and signatures (docs/reference/python.md is its output; a test
checks that the committed file is current)."""

import inspect
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import s4d  # noqa: E402

CLASSES = ["Client", "Pipeline", "Buffer", "Parked"]


def doc(obj) -> str:
    return inspect.cleandoc(obj.__doc__ or "").strip()


def sig(name, obj) -> str:
    try:
        return f"{name}{inspect.signature(obj)}"
    except (TypeError, ValueError):
        return name


def render() -> str:
    out = ["# Python client API (`import s4d`)", "",
           "Generated from the package's docstrings by `clients/python/tools/apidoc.py`",
           "(`make docs-python`); the guide is docs/guides/python.md.", "",
           "```", doc(s4d), "```", ""]
    for cname in CLASSES:
        cls = getattr(s4d, cname)
        out += [f"## class `{sig(cname, cls)}`", "", doc(cls), ""]
        for name, member in inspect.getmembers(cls):
            if name.startswith("_"):
                continue
            if isinstance(inspect.getattr_static(cls, name), property):
                out += [f"### `{cname}.{name}` (property)", "", doc(member) or "", ""]
            elif inspect.isfunction(member) and member.__qualname__.startswith(cname + "."):
                out += [f"### `{cname}.{sig(name, member)}`", "", doc(member) or "", ""]
    out += ["## Functions", ""]
    for name in ("default_socket", "status_name"):
        out += [f"### `{sig(name, getattr(s4d, name))}`", "", doc(getattr(s4d, name)), ""]
    out += ["## Exceptions", "", "Every error is an `S4DError`; a daemon status has a class of its own:", "",
            "| class | meaning |", "|---|---|"]
    for name in s4d.__all__:
        obj = getattr(s4d, name)
        if inspect.isclass(obj) and issubclass(obj, BaseException):
            first = doc(obj).split("\n\n")[0].replace("\n", " ").replace("|", "\\|")
            out.append(f"| `{name}` | {first} |")
    return "\n".join(out).rstrip() + "\n"


if __name__ == "__main__":
    sys.stdout.write(render())
