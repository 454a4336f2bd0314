"""The course's stack, recorded with provenance it computes from what each stage keeps.

course_lib.dynamo -> course_lib.fx graph -> (course_lib.aot joint graph and partition) ->
course_lib.decomp's ATen primitives -> course_lib.inductor (C++ and Triton kernels) -> Triton's
real compiler (TTIR -> TTGIR -> LLVM IR -> PTX, SASS where ptxas/nvdisasm are present).

How each link is made, and how exact it is:

* course Dynamo node -> Python line: the instruction being translated when the node was made
  (a translator subclass stamps ``node.meta["stack_trace"]`` in torch's format). Exact.
* ATen node -> Dynamo node: the graph is re-traced node by node with ``make_fx`` under
  ``preserve_node_meta`` (compat.fx_trace_keeping_meta), so each ATen node has ``from_node``. Exact.
* joint graph (training) -> forward graph: the joint replays the forward's primitives in order;
  nodes are matched by position and op (exact where the op matches). Backward nodes are linked
  to the nodes they read (approximate: course_lib.aot keeps no per-node origin).
* kernel -> ATen nodes: ``Buffer.origin`` of every buffer the kernel computes (exact), plus the
  pointwise nodes inlined into them (found through the graph's users: exact as a set).
  A kernel *line* links to all of the kernel's origins (approximate), except Triton's
  ``tl.store`` lines, which link to the buffer they write (exact).
* TTIR/TTGIR/LLVM IR/PTX/SASS line -> Triton source line: Triton's own ``loc`` / ``!dbg`` /
  ``.loc`` / nvdisasm line info. Exact as far as the compiler keeps it (a line with no location
  inherits the previous one in PTX and SASS).
"""

from __future__ import annotations

import re

from course_lib import compat
from course_lib.explore.fxlines import dynamo_graph_lines, graph_lines, input_nodes
from course_lib.explore.model import Line, Pane
from course_lib.explore.ops import matching, op_name
from course_lib.explore.source import Source, bytecode_lines, line_of_stack_trace

TRITON_STAGES = ("ttir", "ttgir", "llir", "ptx", "sass")
_LANG = {"ttir": "mlir", "ttgir": "mlir", "llir": "llvm", "ptx": "ptx", "sass": "text"}


def _stamping_translator(src: Source):
    """An InstructionTranslator that writes the current Python line into each new node's meta."""
    from course_lib.dynamo import InstructionTranslator

    class Stamping(InstructionTranslator):
        def add_node(self, op, target, args, kwargs, example):
            before = set(self.output.graph.nodes)
            result = super().add_node(op, target, args, kwargs, example)
            line = self.current.line if getattr(self, "current", None) is not None else None
            for node in self.output.graph.nodes:
                if node not in before and line is not None and "stack_trace" not in node.meta:
                    node.meta["stack_trace"] = f'  File "{src.filename}", line {line}, in {src.name}\n'
            return result

    return Stamping


def capture(fn, args, train: bool, src: Source, ptx: bool = True) -> dict:
    """Run course_lib.dynamo over ``fn(*args)``; each graph goes through the course pipeline."""
    import torch

    from course_lib import dynamo

    graphs = []

    def backend(graph, example_inputs):
        entry = {"graph": graph, "inputs": list(example_inputs)}
        graphs.append(entry)
        try:
            entry.update(compile_graph_both(graph, list(example_inputs), train, ptx))
        except Exception as exc:  # the course pipeline cannot take this graph: say so, run it plainly
            entry["error"] = f"{type(exc).__name__}: {exc}".splitlines()[0]
        from course_lib import fx

        return graph.owning_module if isinstance(graph, torch.fx.Graph) else fx.to_torch_fx(graph)

    try:
        with torch.no_grad() if not train else _nothing():
            result, output = dynamo.capture(fn, tuple(args), backend=backend, translator_cls=_stamping_translator(src))
        if graphs:
            return {"graphs": graphs, "output": output, "result": result, "frontend": "course_lib.dynamo"}
        reason = "it captured no graph (every frame ran eagerly)"
    except Exception as exc:  # course_lib.dynamo cannot translate it: start from torch's Dynamo graph
        reason = f"{type(exc).__name__}: {exc}".splitlines()[0][:200]
    graphs.clear()

    def torch_backend(gm, example_inputs):
        backend(gm.graph, example_inputs)
        return gm.forward

    compat.dynamo_reset()
    with torch.no_grad() if not train else _nothing():
        result = torch.compile(fn, backend=torch_backend)(*args)
    compat.dynamo_reset()
    return {"graphs": graphs, "output": None, "result": result, "frontend": "torch._dynamo", "fallback": reason}


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def compile_graph_both(graph, inputs, train: bool, ptx: bool = True) -> dict:
    """ATen graph(s) of one Dynamo graph and their kernels, C++ and Triton.

    Module parameters are lifted to graph inputs first (as AOT Autograd does), so the kernels
    read them like any input and, with ``train=True``, the backward computes their gradients.
    """
    import torch

    from course_lib import decomp, fx

    gm = graph.owning_module if isinstance(graph, torch.fx.Graph) else fx.to_torch_fx(graph)
    if not all(isinstance(a, torch.Tensor) for a in inputs):
        raise ValueError("non-tensor graph inputs")
    plain = [a.detach() for a in inputs]
    lifted, params = _lift_parameters(compat.fx_trace_keeping_meta(gm, plain, None))
    wants_grad = train and any(t.requires_grad for t in [*inputs, *params])
    if not wants_grad:
        args = plain + [p.detach() for p in params]
        aten = compat.fx_trace_keeping_meta(lifted, args, decomp.DECOMPOSITIONS)
        return {
            "parts": [{"kind": "forward", "graph": graph, "aten": aten, "inputs": args, **_kernels(aten, args, ptx)}]
        }
    args = [a.detach().requires_grad_(a.requires_grad) for a in inputs]
    args += [p.detach().requires_grad_(p.requires_grad) for p in params]
    return {"parts": _train_parts(lifted, args, ptx)}


def _lift_parameters(gm):
    """Turn each ``get_attr`` constant (a parameter or buffer make_fx captured) into a placeholder.

    Returns the new GraphModule and the tensors to pass for the new inputs, in order.
    """
    graph = gm.graph
    consts = [n for n in graph.nodes if n.op == "get_attr"]
    if not consts:
        return gm, []
    last_ph = [n for n in graph.nodes if n.op == "placeholder"][-1]
    tensors = []
    for node in consts:
        value = gm
        for part in str(node.target).split("."):
            value = getattr(value, part)
        with graph.inserting_after(last_ph):
            ph = graph.placeholder(f"param_{node.target}".replace(".", "_"))
        ph.meta.update({k: v for k, v in node.meta.items() if k in ("val", "tensor_meta")})
        node.replace_all_uses_with(ph)
        graph.erase_node(node)
        last_ph = ph
        tensors.append(value)
    gm.recompile()
    return gm, tensors


def _kernels(aten, inputs, ptx: bool = True) -> dict:
    from course_lib.inductor import compile_graph

    out = {}
    try:
        out["cpp"] = compile_graph(aten, inputs, codegen="cpp")
    except Exception as exc:
        out["cpp_error"] = f"{type(exc).__name__}: {exc}".splitlines()[0]
    if not ptx:
        return out
    try:
        tri = compile_graph(aten, inputs, codegen="triton")
        out["triton"] = tri
        out["stages"] = _compile_to_ptx(tri)
    except Exception as exc:
        out["triton_error"] = f"{type(exc).__name__}: {exc}".splitlines()[0]
    return out


def _compile_to_ptx(compiled) -> dict:
    try:
        from course_lib.inductor.codegen.triton import compile_to_ptx
    except ImportError:
        from course_lib.inductor.triton_codegen import compile_to_ptx
    return compile_to_ptx(compiled)


def _train_parts(gm, inputs, ptx: bool = True) -> list[dict]:
    """course_lib.aot: joint graph, partition (min-cut), then both graphs through the pipeline."""
    import torch

    from course_lib import aot, decomp

    preserve = compat.require("torch.fx.traceback", "preserve_node_meta")
    runner = compat.require("torch.fx", "Interpreter")(gm).run
    with preserve():
        joint = aot.joint_graph(runner, *inputs)
    plain = [a.detach() for a in inputs]
    _align_joint(joint, compat.fx_trace_keeping_meta(gm, plain, decomp.DECOMPOSITIONS).graph)
    part = aot.partition(joint, "min_cut")
    fwd_gm = _to_gm(part.forward)
    plain = [a.detach() for a in inputs]
    fwd_out = list(fwd_gm(*plain))
    fwd_aten = compat.fx_trace_keeping_meta(fwd_gm, plain, None)
    n_saved = len(part.saved)
    saved_vals = fwd_out[len(fwd_out) - n_saved :] if n_saved else []
    user_outs = fwd_out[: len(fwd_out) - n_saved]
    bw_inputs = [*saved_vals, *[torch.ones_like(o) for o in user_outs]]
    bw_gm = _to_gm(part.backward)
    n_ph = sum(1 for n in bw_gm.graph.nodes if n.op == "placeholder")
    bw_inputs = bw_inputs[:n_ph]
    bw_aten = compat.fx_trace_keeping_meta(bw_gm, bw_inputs, None)
    return [
        {"kind": "forward", "graph": part.forward, "aten": fwd_aten, "inputs": plain, "joint": joint,
         "saved": list(part.saved), **_kernels(fwd_aten, plain, ptx)},
        {"kind": "backward", "graph": part.backward, "aten": bw_aten, "inputs": bw_inputs, "joint": joint,
         **_kernels(bw_aten, bw_inputs, ptx)},
    ]  # fmt: skip


def _to_gm(graph):
    from course_lib import fx

    return fx.to_torch_fx(graph)


def _align_joint(joint, reference) -> None:
    """Give the joint graph's forward nodes the ``from_node`` of the same function's ATen trace.

    The joint graph first replays the forward's primitives in order (traced with the same
    decomposition table as ``reference``): walk both in order and copy the meta where the ops
    match, resynchronising over a few nodes where they do not. Exact where the ops match;
    the backward nodes after them keep no origin (they link to the values they read).
    """
    ref = [n for n in reference.nodes if n.op == "call_function"]
    i, backward = 0, set()
    for node in joint.graph.nodes:
        if node.op == "placeholder" and node.name.startswith("tangents"):
            backward.add(node)
        if any(a in backward for a in input_nodes(node)):
            backward.add(node)  # computed from a gradient: a backward node, never a forward op
        if node.op != "call_function" or i >= len(ref) or node in backward:
            continue
        for j in range(i, min(i + 4, len(ref))):
            if str(ref[j].target) == str(node.target):
                for key in ("from_node", "stack_trace"):
                    if key in ref[j].meta:
                        node.meta[key] = ref[j].meta[key]
                i = j + 1
                break


# ----------------------------------------------------------------------------- panes


def dynamo_panes(rec, src: Source, fn) -> list[Pane]:
    import inspect

    code = getattr(inspect.unwrap(getattr(fn, "forward", fn)), "__code__", None)
    panes = []
    if code is not None:
        panes.append(Pane("course.bytecode", "course", "bytecode", "Bytecode course_lib.dynamo reads",
                          bytecode_lines(code, src, "course.bytecode"), "text",
                          "course_lib.dynamo interprets these instructions symbolically."))  # fmt: skip
    for gi, entry in enumerate(rec["graphs"]):
        note = entry.get("error", "")
        panes.append(Pane(f"course.fx{gi}", "course", "fx", f"course_lib.dynamo graph {gi}",
                          dynamo_graph_lines(entry["graph"], f"course.fx{gi}", src), "python", note))  # fmt: skip
    if rec.get("fallback"):
        note = f"course_lib.dynamo could not translate this function ({rec['fallback']}); the course side starts from torch's Dynamo graph"
        for p in panes:
            if p.stage == "fx":
                p.note = (note + ". " + p.note).strip(". ")
                p.title = p.title.replace("course_lib.dynamo graph", "torch._dynamo graph (course fallback)")
        return panes
    guards = list(rec["output"].guards.values())
    glines = [Line(f"course.guards:{i}", str(g), tag="guard") for i, g in enumerate(guards)]
    phs = {n.name for n in rec["graphs"][0]["graph"].nodes if n.op == "placeholder"} if rec["graphs"] else set()
    for ln in glines:
        m = re.match(r"L\['(\w+)'\]", ln.text)
        hit = next((c for c in (f"L_{m.group(1)}_", m.group(1)) if c in phs), None) if m else None
        if hit:
            ln.sources = (f"course.fx0:{hit}",)
    panes.append(Pane("course.guards", "course", "guards", "course_lib.dynamo's guards", glines, "text"))
    return panes


def _origin_ids(node, prefix: str, known: set[str]) -> list[str]:
    """The ``from_node`` links of ``node`` that name lines of pane ``prefix``: the chain's roots
    (Dynamo's nodes) or, for a graph traced from the joint graph, its nearest links."""
    for roots in (True, False):
        ids = [f"{prefix}:{name}" for name, _ in compat.fx_node_origins(node, roots=roots)]
        ids = [i for i in ids if i in known]
        if ids:
            return ids
    return []


def aten_panes(rec, src: Source) -> list[Pane]:
    panes = []
    for gi, entry in enumerate(rec["graphs"]):
        fx_ids = {f"course.fx{gi}:{n.name}" for n in entry["graph"].nodes}
        for pi, part in enumerate(entry.get("parts", [])):
            if "joint" in part and pi == 0:
                panes.append(_joint_pane(part["joint"], gi, entry["graph"], src))
            key = f"course.aten{gi}_{pi}"
            part["key"] = key
            up_prefix, up_ids = (f"course.fx{gi}", fx_ids)
            if "joint" in part:
                up_prefix = f"course.joint{gi}"
                up_ids = {f"{up_prefix}:{n.name}" for n in part["joint"].graph.nodes}

            def sources(node, key=key, up_prefix=up_prefix, up_ids=up_ids, part=part):
                roots = _origin_ids(node, up_prefix, up_ids)
                if roots:
                    return roots, True
                line = line_of_stack_trace(node.meta.get("stack_trace"), src)
                if line:
                    return [line], True
                if node.op == "placeholder":
                    found = _placeholder_source(node, part, up_prefix, up_ids)
                    return found if found[0] else ([f"{key}:{u.name}" for u in node.users], False)
                return [f"{key}:{n.name}" for n in input_nodes(node)], False

            lines = graph_lines(part["aten"].graph, key, sources)
            saved = set(part.get("saved", ()))
            title = f"course {part['kind']} ATen primitives (course_lib.decomp), graph {gi}"
            panes.append(Pane(key, "course", "aot", title, lines, "python",
                              f"{len(saved)} saved tensors: {', '.join(sorted(saved))}" if saved else ""))  # fmt: skip
    return panes


def _placeholder_source(node, part, up_prefix, up_ids):
    """The i-th input of a re-traced graph is the i-th placeholder of the graph it came from."""
    phs = [n for n in part["aten"].graph.nodes if n.op == "placeholder"]
    src_graph = part.get("graph") if "graph" in part else None
    if src_graph is None:
        return [], False
    src_phs = [n for n in src_graph.nodes if n.op == "placeholder"]
    idx = phs.index(node)
    if idx < len(src_phs):
        name = src_phs[idx].name
        cand = f"{up_prefix}:{name}"
        return ([cand], True) if cand in up_ids else ([], False)
    return [], False


def _joint_pane(joint, gi, dyn_graph, src) -> Pane:
    key = f"course.joint{gi}"
    fx_ids = {f"course.fx{gi}:{n.name}" for n in dyn_graph.nodes}
    dyn_phs = [n.name for n in dyn_graph.nodes if n.op == "placeholder"]
    phs = [n for n in joint.graph.nodes if n.op == "placeholder"]

    def sources(node):
        roots = _origin_ids(node, f"course.fx{gi}", fx_ids)
        if roots:
            return roots, True
        line = line_of_stack_trace(node.meta.get("stack_trace"), src)
        if line:
            return [line], True
        if node.op == "placeholder" and node.name.startswith("primals"):
            i = phs.index(node)
            if i < len(dyn_phs):
                return [f"course.fx{gi}:{dyn_phs[i]}"], True
            return [f"{key}:{u.name}" for u in node.users], False  # a lifted parameter: where it is used
        if node.op == "placeholder":  # a tangent: the gradient arriving for an output
            outs = [n for n in joint.graph.nodes if n.op == "output"]
            return [f"{key}:{n.name}" for n in input_nodes(outs[0])][:1] if outs else [src.def_id], False
        return [f"{key}:{n.name}" for n in input_nodes(node)], False

    return Pane(
        key,
        "course",
        "joint",
        f"course_lib.aot joint graph {gi}",
        graph_lines(joint.graph, key, sources),
        "python",
        "Backward nodes link to the nodes they read (course_lib.aot keeps no per-node origin).",
    )


def kernel_origins(compiled, aten_graph) -> dict[str, list[str]]:
    """ATen node names each generated kernel computes: its buffers' origins, plus the pointwise
    nodes that were inlined into those buffers (a node with no buffer of its own is computed
    wherever its users are)."""
    names = {n.name: n for n in aten_graph.nodes}
    owner: dict[str, set[str]] = {}
    out: dict[str, list[str]] = {}
    buffers = {b.name: b for b in compiled.graph.buffers}
    for k in compiled.schedule.kernels:
        if k.kind != "kernel":
            continue
        origins = [origin_name(buffers[b].origin, names) for b in k.nodes if b in buffers]
        if not any(origins):  # a copy made to realize a value ("realize", "output x"): what it reads
            origins = [origin_name(buffers[r].origin, names) for r in k.plan.reads if r in buffers]
        origins = [o for o in origins if o]
        out[k.name] = list(dict.fromkeys(origins))
        for o in origins:
            owner.setdefault(o, set()).add(k.name)
    realized = {origin_name(b.origin, names) for b in buffers.values()}

    def kernels_of(node, depth=0) -> set[str]:
        if node.name in owner:
            return owner[node.name]
        if node.name in realized or depth > 50:
            return set()
        found = set()
        for user in node.users:
            found |= kernels_of(user, depth + 1)
        return found

    for node in aten_graph.nodes:
        if node.op == "call_function" and node.name not in realized:
            for kname in kernels_of(node):
                out[kname].append(node.name)
    return out


def origin_name(origin: str, names) -> str:
    """The ATen node a ``Buffer.origin`` names: ``"add"``, ``"output add"``, ``"input of mul"``."""
    if origin in names:
        return origin
    last = origin.split()[-1] if origin else ""
    return last if last in names else ""


def _split_source(source: str, names: list[str], start_re: str) -> dict[str, tuple[int, int]]:
    """``{kernel: (first, last)}`` 1-based line ranges of each kernel in a generated module."""
    lines = source.splitlines()
    starts = []
    for i, text in enumerate(lines):
        for name in names:
            if re.search(start_re.format(name=re.escape(name)), text):
                starts.append((i, name))
    starts.sort()
    spans = {}
    for j, (i, name) in enumerate(starts):
        end = starts[j + 1][0] if j + 1 < len(starts) else len(lines)
        spans.setdefault(name, (i + 1, end))
    return spans


def _kernel_pane(key, title, source, spans, origins, aten_key, lang, writes=None, ops=None) -> Pane:
    lines = source.splitlines()
    out = []
    for kname, (first, last) in spans.items():
        srcs = tuple(f"{aten_key}:{o}" for o in origins.get(kname, ()))
        kops = [(f"{aten_key}:{o}", (ops or {}).get(o, "")) for o in origins.get(kname, ())]
        out.append(Line(f"{key}:{kname}", f"// kernel {kname} fuses: {', '.join(origins.get(kname, ()))}", srcs, True,
                        "kernel"))  # fmt: skip
        for ln in range(first, last + 1):
            text = lines[ln - 1]
            if not text.strip():
                continue
            m = re.search(r"tl\.store\(out_ptr(\d+)", text)
            if m and writes and kname in writes and int(m.group(1)) < len(writes[kname]):
                origin = writes[kname][int(m.group(1))]
                out.append(Line(f"{key}:{ln}", text, (f"{aten_key}:{origin}",) if origin else srcs, bool(origin)))
            else:
                out.append(Line(f"{key}:{ln}", text, tuple(matching(text, kops)) or srcs, False))
    return Pane(key, "course", "kernels" if lang == "cpp" else "triton", title, out, lang,
                "Kernel origins are exact; a line inside a fused kernel links to all its origins"
                + ("; tl.store lines link to the buffer they write." if lang == "python" else "."))  # fmt: skip


def kernel_panes(rec) -> list[Pane]:
    from course_lib.triton.sourcemap import line_map

    panes = []
    for gi, entry in enumerate(rec["graphs"]):
        for pi, part in enumerate(entry.get("parts", [])):
            tag, aten_key, aten = f"{gi}_{pi}", part["key"], part["aten"].graph
            ops = {n.name: op_name(n.target) for n in aten.nodes if n.op == "call_function"}
            if "cpp" in part:
                comp = part["cpp"]
                origins = kernel_origins(comp, aten)
                spans = _split_source(comp.kernel_code, list(origins), r"\b{name}\s*\(")
                panes.append(_kernel_pane(f"course.k{tag}", f"course_lib.inductor C++ kernels ({part['kind']}, graph {gi})",
                                          comp.kernel_code, spans, origins, aten_key, "cpp", None, ops))  # fmt: skip
            if "triton" in part:
                comp = part["triton"]
                origins = kernel_origins(comp, aten)
                buffers = {b.name: b for b in comp.graph.buffers}
                names = {n.name for n in aten.nodes}
                writes = {k.name: [origin_name(buffers[w].origin, names) if w in buffers else "" for w in k.plan.writes]
                          for k in comp.schedule.kernels if k.kind == "kernel"}  # fmt: skip
                spans = _split_source(comp.kernel_code, list(origins), r"^def {name}\(")
                spans = {k: (max(1, a - 1), b) for k, (a, b) in spans.items()}  # the @triton.jit line above
                tri_key = f"course.tri{tag}"
                pane = _kernel_pane(tri_key, f"course_lib.inductor Triton kernels ({part['kind']}, graph {gi})",
                                    comp.kernel_code, spans, origins, aten_key, "python", writes, ops)  # fmt: skip
                panes.append(pane)
                known = {ln.id for ln in pane.lines}
                for stage in TRITON_STAGES:
                    rows = []
                    for kname, st in part.get("stages", {}).items():
                        if stage not in st.raw or not st.raw[stage]:
                            continue
                        rows.append(Line(f"course.{stage}{tag}:{kname}", f"// {stage} of {kname}",
                                         (f"{tri_key}:{kname}",), True, "kernel"))  # fmt: skip
                        for j, (text, py) in enumerate(line_map(st, stage)):
                            sid = f"{tri_key}:{py}" if py is not None else None
                            rows.append(Line(f"course.{stage}{tag}:{kname}:{j}", text,
                                             (sid,) if sid in known else (f"course.{stage}{tag}:{kname}",),
                                             sid in known))  # fmt: skip
                    if rows:
                        title = f"{stage.upper()} (Triton's compiler, {part['kind']}, graph {gi})"
                        panes.append(Pane(f"course.{stage}{tag}", "course", stage, title, rows, _LANG[stage],
                                          "Each line's Python line is Triton's own location info."))  # fmt: skip
    return panes


def panes(fn, args, src: Source, train: bool, ptx: bool = True) -> tuple[list[Pane], dict]:
    rec = capture(fn, args, train, src, ptx)
    out = dynamo_panes(rec, src, fn) + aten_panes(rec, src) + kernel_panes(rec)
    return out, rec
