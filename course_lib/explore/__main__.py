"""``python -m course_lib.explore path/to/file.py:function --shapes 8x16 16x32 --out explore.html``

Loads ``function`` from the file (an ``nn.Module`` subclass is instantiated with no arguments),
makes one seeded random input per ``--shapes`` entry (``8x16`` float32; ``long:4x8`` integers in
[0, 10); ``1`` a one-element tensor) and writes the explorer page.
"""

from __future__ import annotations

import argparse
import importlib.util
import pathlib
import sys

DTYPES = {"float": "float32", "float32": "float32", "float64": "float64", "long": "int64", "int": "int64"}


def parse_shape(spec: str):
    """``"8x16"`` -> (dtype name, (8, 16)); raises ValueError with the spec in the message."""
    dtype, _, dims = spec.rpartition(":")
    dtype = dtype or "float32"
    if dtype not in DTYPES:
        raise ValueError(f"unknown dtype {dtype!r} in shape {spec!r} (use one of {', '.join(DTYPES)})")
    try:
        shape = tuple(int(d) for d in dims.lower().split("x")) if dims else ()
    except ValueError:
        raise ValueError(f"shape {spec!r} is not like 8x16 or long:4x8") from None
    if any(d <= 0 for d in shape):
        raise ValueError(f"shape {spec!r} has a size that is not positive")
    return DTYPES[dtype], shape


def make_inputs(specs: list[str], requires_grad: bool = False, seed: int = 0) -> list:
    import torch

    g = torch.Generator().manual_seed(seed)
    out = []
    for spec in specs:
        dtype, shape = parse_shape(spec)
        if dtype == "int64":
            out.append(torch.randint(0, 10, shape, generator=g))
        else:
            t = torch.randn(shape, generator=g, dtype=getattr(torch, dtype))
            out.append(t.requires_grad_(requires_grad))
    return out


def load_function(target: str):
    """``file.py:name`` -> the object; clear errors for a missing file or name."""
    path, sep, name = target.rpartition(":")
    if not sep or not path or not name:
        raise ValueError(f"give the function as path/to/file.py:function, got {target!r}")
    file = pathlib.Path(path)
    if not file.is_file():
        raise ValueError(f"no such file: {path}")
    spec = importlib.util.spec_from_file_location(f"explore_target_{file.stem}", file)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    if not hasattr(module, name):
        names = [n for n in vars(module) if not n.startswith("_")]
        raise ValueError(f"{path} has no {name!r}; it defines: {', '.join(names[:20])}")
    obj = getattr(module, name)
    import torch

    if isinstance(obj, type) and issubclass(obj, torch.nn.Module):
        obj = obj()
    return obj


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m course_lib.explore", description=__doc__.splitlines()[0])
    parser.add_argument("target", help="path/to/file.py:function")
    parser.add_argument("--shapes", nargs="+", required=True, help="one per input: 8x16, long:4x8, ...")
    parser.add_argument("--out", default="explore.html", help="the HTML page to write")
    parser.add_argument("--train", action="store_true", help="inputs require grad; backward graphs too")
    parser.add_argument("--backend", default="both", choices=("both", "real", "course"))
    args = parser.parse_args(argv)
    try:
        fn = load_function(args.target)
        inputs = make_inputs(args.shapes, requires_grad=args.train)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    from course_lib.explore import explore

    try:
        ex = explore(fn, *inputs, train=args.train, backend=args.backend, progress=True)
    except (TypeError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    ex.save(args.out)
    print(ex)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
