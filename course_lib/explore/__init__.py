"""The stack explorer: one function through every stage, course beside real, line to line.

``explore(fn, *example_inputs, train=False)`` compiles ``fn`` twice:

* **real**: ``torch.compile`` with Inductor. Dynamo's transformed bytecode and guards, its FX
  graph (``node.meta["stack_trace"]``), AOT Autograd's forward/backward graphs after Inductor's
  decompositions and post-grad passes (``from_node``, saved tensors marked), Inductor's kernels
  with their origins (``config.trace.provenance_tracking_level``) and its wrapper.
* **course**: course_lib.dynamo -> course_lib.fx -> course_lib.aot (with ``train=True``) ->
  course_lib.decomp -> course_lib.inductor's C++ and Triton kernels -> Triton's real compiler
  (TTIR -> TTGIR -> LLVM IR -> PTX -> SASS), each IR line carrying Triton's source location.

Every line of every pane names the lines it came from (:mod:`course_lib.explore.model`); the
HTML page (:mod:`course_lib.explore.page`) highlights, on a click, what a line came from and what
it became in every pane. Which links are exact and which approximate is said in
:mod:`course_lib.explore.real` and :mod:`course_lib.explore.course`. Names the real tools make from
counters, uuids or addresses (``__compiled_fn_8_<uuid>``) are renumbered by
:mod:`course_lib.explore.stable`, so the same function gives the same page in every run.

Real sources this teaches: ``torch/fx/traceback.py`` (NodeSource, preserve_node_meta),
``torch/_inductor/debug.py`` (provenance tracking), ``triton/compiler/compiler.py`` (locations),
tlparse's provenance view. From a shell::

    python -m course_lib.explore path/to/file.py:function --shapes 8x16 16x32 --out explore.html
"""

from __future__ import annotations

import time

from course_lib.explore.model import Exploration, Line, Pane

__all__ = ["Exploration", "Line", "Pane", "explore", "ptx_exercise_lines"]

REAL_TRITON_NOTE = (
    "Inductor writes Triton kernels only for a GPU device (it asks the GPU driver for the target at "
    "code-generation time), so on this CPU-only machine the real side stops at Inductor's C++; the "
    "TTIR ... SASS panes come from the course's Triton kernels compiled by Triton's real compiler."
)


def _has_cuda() -> bool:
    import torch

    return torch.cuda.is_available()


def _check_inputs(fn, example_inputs) -> None:
    import torch

    if not callable(fn):
        raise TypeError(f"explore needs a function or nn.Module, got {type(fn).__name__}")
    if not example_inputs:
        raise ValueError("explore needs example inputs: explore(fn, x, w, ...)")
    bad = [type(a).__name__ for a in example_inputs if not isinstance(a, (torch.Tensor, int, float, bool))]
    if bad:
        raise TypeError(f"explore's example inputs must be tensors or numbers, got {', '.join(bad)}")


def explore(fn, *example_inputs, train: bool = False, backend: str = "both", ptx: bool = True,
            progress: bool = False) -> Exploration:  # fmt: skip
    """Compile ``fn(*example_inputs)`` through the real stack and through course_lib.

    ``train=True`` also runs backward on the output (summed), so AOT's backward graph and its
    kernels appear; give the inputs to differentiate ``requires_grad=True``. A function that
    calls ``.backward()`` itself (a training step) shows its backward with ``train=False``.
    ``backend``: ``"both"`` (default), ``"real"`` or ``"course"``: which side to compile.
    ``ptx=False`` stops the course side at its C++ kernels (no Triton compile: faster).
    """
    from course_lib.explore import course, real
    from course_lib.explore.source import python_pane, source_of
    from course_lib.explore.stable import stable_panes, stable_text

    _check_inputs(fn, example_inputs)
    if backend not in ("both", "real", "course"):
        raise ValueError(f"backend must be 'both', 'real' or 'course', got {backend!r}")
    src = source_of(fn)
    panes, notes, timings, recs = [python_pane(src)], [], {}, {}
    for side, module in (("course", course), ("real", real)):
        if backend not in ("both", side):
            continue
        t0 = time.perf_counter()
        try:
            extra = {"ptx": ptx} if side == "course" else {}
            side_panes, recs[side] = module.panes(fn, list(example_inputs), src, train, **extra)
        except Exception as exc:  # one side failing still shows the other, with the reason
            reason = f"{type(exc).__name__}: {exc}".splitlines()[0]
            notes.append(f"the {side} side could not compile this function ({reason})")
            side_panes = []
        panes += side_panes
        timings[side] = time.perf_counter() - t0
        if progress:
            print(f"explore: {side} side in {timings[side]:.1f} s")
    if backend in ("both", "real") and not _has_cuda():
        notes.append(REAL_TRITON_NOTE)
    if recs.get("course", {}).get("fallback"):
        notes.append(f"course_lib.dynamo could not translate {src.name} ({recs['course']['fallback']}); "
                     "the course side starts from torch's Dynamo graph")  # fmt: skip
    for side, rec in recs.items():
        for entry in rec.get("graphs", []) if side == "course" else []:
            if "error" in entry:
                notes.append(f"course: a graph ran without the course pipeline ({entry['error']})")
            for part in entry.get("parts", []):
                for k in ("cpp_error", "triton_error"):
                    if k in part:
                        notes.append(f"course {part['kind']}: {k.split('_')[0]} kernels unavailable ({part[k]})")
    stable_panes(panes)  # Dynamo's counters, uuids and addresses -> names that do not change between runs
    notes = [stable_text(n) for n in notes]
    result = Exploration(getattr(src, "name", "fn"), panes, [], notes, src.first_line)
    result.summary = summarise(result)
    result.timings = timings
    return result


def _count(ex: Exploration, side: str, stage: str, tag: str | None = None) -> int:
    return sum(1 for p in ex.panes_of(side, stage) for ln in p.lines if tag is None or ln.tag == tag)


def _nodes(ex: Exploration, side: str, stage: str) -> str:
    ps = ex.panes_of(side, stage)
    if not ps:
        return "-"
    return f"{len(ps)} graph(s), {sum(len(p.lines) for p in ps)} nodes"


def _fused(ex: Exploration, side: str, stage: str) -> str:
    kernels = [ln for p in ex.panes_of(side, stage) for ln in p.lines if ln.tag == "kernel"]
    if not kernels:
        return "-"
    sizes = sorted((len(k.sources) for k in kernels), reverse=True)
    return f"{len(kernels)} kernels, nodes per kernel {sizes}"


def summarise(ex: Exploration) -> list[tuple[str, str, str]]:
    """Per stage, what the course and the real tool made (counts a reader can compare)."""
    saved = {s: _count(ex, s, "aot", "saved") for s in ("course", "real")}
    course_saved = sum(len(p.note.split(": ", 1)[1].split(", ")) for p in ex.panes_of("course", "aot")
                       if p.note.startswith(tuple("0123456789")) and ": " in p.note)  # fmt: skip
    rows = [
        ("Dynamo FX graph", _nodes(ex, "course", "fx"), _nodes(ex, "real", "fx")),
        ("guards", str(_count(ex, "course", "guards")), str(_count(ex, "real", "guards"))),
        ("AOT / ATen graphs", _nodes(ex, "course", "aot"), _nodes(ex, "real", "aot")),
        ("saved tensors", str(course_saved or saved["course"]), str(saved["real"])),
        ("C++ kernels", _fused(ex, "course", "kernels"), _fused(ex, "real", "kernels")),
        ("Triton kernels", _fused(ex, "course", "triton"), "- (needs a GPU)"),
    ]
    for stage in ("ttir", "ttgir", "llir", "ptx", "sass"):
        n = sum(len(p.lines) for p in ex.panes_of("course", stage))
        if n:
            rows.append((stage.upper(), f"{n} lines", "- (needs a GPU)"))
    return rows


def ptx_exercise_lines(ex: Exploration, opcode_prefixes=("ld.global", "st.global", "erf", "ex2", "fma", "mul.f32",
                                                           "add.f32", "max.f32", "div")) -> list[str]:  # fmt: skip
    """Ids of PTX lines (course side) that trace back to exactly one Python line: the candidates
    the tracing exercise draws from."""
    out = []
    for ln in ex.ptx_lines("course"):
        body = ln.text.strip()
        if body.startswith(tuple(opcode_prefixes)) or any(
            f"\t{p}" in ln.text or f" {p}" in body for p in opcode_prefixes
        ):
            if len(ex.python_lines(ln.id)) == 1:
                out.append(ln.id)
    return out
