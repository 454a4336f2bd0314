"""A source tour of Triton's compiler, read from the installed package rather than from file paths.

Teaches: ``third_party/nvidia/backend/compiler.py`` (installed as ``triton/backends/nvidia/
compiler.py``): ``make_ttir`` and ``make_ttgir`` build an MLIR pass manager and add passes with
one Python call each (``passes.ttgpuir.add_coalesce(pm)``), some only for some GPUs
(``if capability // 10 in [8, 9]:``). :func:`stage_source` prints the installed method with
``inspect.getsource``; :func:`align` lines its ``add_*`` calls up with the passes MLIR really ran
(``compile_stages(..., passes=True)``), so the learner sees which branch a target took.
Position: the backend's source -> the pass list of one compilation.
"""

from __future__ import annotations

import dataclasses
import inspect
import re

from course_lib import compat

BACKENDS = {"nvidia": ("triton.backends.nvidia.compiler", "CUDABackend")}
_ADD = re.compile(r"^\s*(?:nvidia\.)?passes\.(\w+)\.add_(\w+)\(pm")
# source spelling -> MLIR flag spelling, where the two names differ beyond prefixes and dashes
ALIASES = {
    "canonicalizer": "canonicalize",
    "tritonlicm": "licm",
    "hopperwarpspec": "warpspecialization",
    "lowermma": "mmalowering",
    "converttottgpuir": "converttritontotritongpu",
}
_FLAG_PREFIXES = ("triton-nvidia-gpu-", "triton-nvidia-", "tritongpu-", "triton-", "nvgpu-")


def stage_source(method: str = "make_ttgir", backend: str = "nvidia") -> str:
    """The installed source of ``<Backend>.<method>`` (``make_ttir``, ``make_ttgir``, ``make_llir``...)."""
    if backend not in BACKENDS:
        raise ValueError(f"backend {backend!r}: the tour knows {', '.join(BACKENDS)}")
    cls = compat.require(*BACKENDS[backend])
    if not hasattr(cls, method):
        raise ValueError(
            f"{BACKENDS[backend][1]} has no {method!r}; stages: make_ttir, make_ttgir, make_llir, make_ptx"
        )
    return inspect.getsource(getattr(cls, method))


@dataclasses.dataclass
class Call:
    line: int  # 1-based, in stage_source's text
    group: str  # ttir, ttgpuir, ttnvgpuir, common, hopper...
    name: str  # the add_ suffix: coalesce, remove_layout_conversions...
    text: str


def declared_passes(source: str) -> list[Call]:
    """Every ``passes.<group>.add_<name>(pm, ...)`` call, in source order (all branches)."""
    out = []
    for k, line in enumerate(source.splitlines(), 1):
        m = _ADD.match(line)
        if m:
            out.append(Call(k, m[1], m[2], line.strip()))
    return out


def _key_from_source(name: str) -> str:
    key = name.replace("_", "").lower()
    return ALIASES.get(key, key)


def _key_from_flag(flag: str) -> str:
    for prefix in _FLAG_PREFIXES:
        if flag.startswith(prefix):
            flag = flag[len(prefix) :]
            break
    return flag.replace("-", "").replace("_", "").lower()


def reached_lines(source: str, capability: int, options: dict | None = None) -> set[int]:
    """Line numbers (1-based) of the statements a compilation for ``capability`` (90 for sm_90)
    executes: each ``if`` test is evaluated with that capability and ``options`` (attributes of
    ``opt``; missing ones are falsy; ``is_enabled(opt, name)`` reads them too)."""
    import ast
    import textwrap
    import types

    opts = types.SimpleNamespace(**(options or {}))
    names = {"capability": capability, "opt": _Falsy(opts), "is_enabled": lambda o, k: bool(getattr(o, k, False))}
    tree = ast.parse(textwrap.dedent(source))
    reached: set[int] = set()

    def walk(body):
        for stmt in body:
            if isinstance(stmt, ast.If):
                taken = bool(eval(compile(ast.Expression(stmt.test), "<test>", "eval"), {}, names))  # noqa: S307
                walk(stmt.body if taken else stmt.orelse)
            else:
                reached.update(range(stmt.lineno, (stmt.end_lineno or stmt.lineno) + 1))

    walk(tree.body[0].body)
    return reached


class _Falsy:
    """``opt`` for :func:`reached_lines`: the given options, and False for any other attribute."""

    def __init__(self, ns):
        self._ns = ns

    def __getattr__(self, name):
        return getattr(self._ns, name, False)


@dataclasses.dataclass
class Aligned:
    call: Call
    ran: str | None  # the MLIR pass class that ran for this call, or None (another branch)


def align(source: str, ran: list, capability: int | None = None) -> list[Aligned]:
    """Pair the declared calls with the passes that ran (``PassDump``s), in order.

    With ``capability``, only the calls on the branches that GPU takes (:func:`reached_lines`).
    Then a longest common subsequence of the two name lists, a call matching a pass when its
    name equals the pass's flag without prefixes and dashes (``ALIASES`` where they differ).
    A call left unpaired added a pass that did not show up in the dump.
    """
    calls = declared_passes(source)
    if capability is not None:  # calls on a branch this GPU does not take cannot have run
        reached = reached_lines(source, capability)
        calls = [c for c in calls if c.line in reached]
    keys = [_key_from_source(c.name) for c in calls]
    flags = [_key_from_flag(p.flag) for p in ran]
    n, m = len(keys), len(flags)
    best = [[0] * (m + 1) for _ in range(n + 1)]  # best[i][j]: pairs within calls[i:], ran[j:]
    for i in range(n - 1, -1, -1):
        for j in range(m - 1, -1, -1):
            pair = best[i + 1][j + 1] + 1 if keys[i] == flags[j] else 0
            best[i][j] = max(pair, best[i + 1][j], best[i][j + 1])
    out, i, j = [], 0, 0
    while i < n:
        if j < m and keys[i] == flags[j] and best[i][j] == best[i + 1][j + 1] + 1:
            out.append(Aligned(calls[i], ran[j].name))
            i, j = i + 1, j + 1
        elif j < m and best[i][j] == best[i][j + 1] and best[i][j] != best[i + 1][j]:
            j += 1
        else:
            out.append(Aligned(calls[i], None))
            i += 1
    return out
