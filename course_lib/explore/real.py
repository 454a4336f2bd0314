"""The real stack, recorded once with its own provenance (torch.compile with Inductor).

What each link is read from (all recorded by torch itself, nothing guessed):

* Dynamo graph node -> Python line: ``node.meta["stack_trace"]`` (the frame Dynamo was
  translating when it made the node). Exact.
* guard -> graph input: the guarded local ``L['x']`` is the placeholder ``l_x_``. Exact.
* AOT forward/backward (post-grad ATen) node -> Dynamo node: ``node.meta["from_node"]``
  (``torch/fx/traceback.py``'s NodeSource chain). Exact. Where a backward node has none, its
  ``stack_trace`` (copied from the forward node with the same ``seq_nr``) gives the line.
* saved tensors: the backward graph's non-tangent inputs, named after the forward nodes. Exact.
* kernel -> post-grad nodes: Inductor's kernel origins (``config.trace.provenance_tracking_level``,
  ``torch/_inductor/debug.py``). Exact for the kernel as a whole; each *line* of a fused kernel is
  linked to all of the kernel's origins (approximate: Inductor keeps no per-line origin).

Teaches ``torch/_dynamo/output_graph.py`` (stack traces), ``torch/_functorch/_aot_autograd``
(from_node), ``torch/_inductor/debug.py`` (provenance tracking).
"""

from __future__ import annotations

import re

from course_lib import compat
from course_lib.explore.fxlines import dynamo_graph_lines, graph_lines, input_nodes
from course_lib.explore.model import Line, Pane
from course_lib.explore.ops import matching, op_name
from course_lib.explore.source import Source, bytecode_lines, line_of_stack_trace

_CALL = re.compile(r"\b([A-Za-z_]\w*(?:\.\w+)?)\(")
BYTECODE_NOTE = (
    "What CPython runs instead of the original: call the compiled graph, rebuild the outputs, call the "
    "resume function after a graph break. Dynamo's generated names are numbered from 1 in the order it made "
    "them (course_lib.explore.stable): its own counters depend on what compiled before."
)


def _backward_step(out):
    """Call backward on the output (summed to a scalar) so AOT's backward graph gets compiled."""
    import torch

    outs = out if isinstance(out, (tuple, list)) else [out]
    tensors = [o for o in outs if isinstance(o, torch.Tensor) and o.requires_grad]
    if not tensors:
        raise ValueError("explore(train=True) needs an output that requires grad (give an input requires_grad=True)")
    sum(t.float().sum() for t in tensors).backward()
    return out


def capture(fn, args, train: bool):
    """Run ``fn`` once under torch.compile(Inductor), recording every stage."""
    import torch

    explain = compat.dynamo_explain(fn, *args)
    compat.dynamo_reset()
    gms, codes_seen = [], []
    inductor = compat.inductor_compile_fx()

    def backend(gm, example_inputs):
        gms.append(gm)
        return inductor(gm, example_inputs)

    compiled = torch.compile(fn, backend=backend)

    def run(*a):
        out = compiled(*a)
        return _backward_step(out) if train else out

    with compat.dynamo_bytecode_hook(codes_seen):
        result, codes, graphs, kernels = compat.inductor_run_with_provenance(run, *args)
    compat.dynamo_reset()
    return {"explain": explain, "gms": gms, "bytecode": codes_seen, "codes": codes, "post_grad": graphs,
            "kernels": kernels, "result": result}  # fmt: skip


def _guard_lines(explain, fx0: set[str]) -> list[Line]:
    out = []
    for i, g in enumerate(explain.out_guards):
        try:
            where, kind, _ = compat.guard_summary(g)
        except Exception:  # a guard torch adds without a source: show it, unlinked
            where, kind = str(getattr(g, "name", "guard")), "?"
        m = re.search(r"L\['(\w+)'\]", where)
        ph = f"real.fx0:l_{m.group(1)}_" if m else None
        out.append(Line(f"real.guards:{i}", f"{kind:<16} {where}", (ph,) if ph in fx0 else (), tag="guard"))
    return out


def dynamo_panes(rec, src: Source) -> list[Pane]:
    panes = []
    for fi, (code, new_code) in enumerate(rec["bytecode"]):  # the function's frame, then each resume frame
        key = "real.bytecode" + (str(fi) if fi else "")
        title = "Dynamo's transformed bytecode" + (f" of {code.co_name}" if fi else "")
        panes.append(Pane(key, "real", "bytecode", title, bytecode_lines(new_code, src, key), "text", BYTECODE_NOTE))
    for gi, gm in enumerate(rec["gms"]):
        lines = dynamo_graph_lines(gm.graph, f"real.fx{gi}", src)
        panes.append(Pane(f"real.fx{gi}", "real", "fx", f"Dynamo FX graph {gi}", lines, "python",
                          "node.meta['stack_trace'] links each node to its Python line."))  # fmt: skip
    fx0 = {ln.id for p in panes if p.key == "real.fx0" for ln in p.lines}
    panes.append(Pane("real.guards", "real", "guards", "Dynamo's guards", _guard_lines(rec["explain"], fx0), "text",
                      "Checked before every call; a failed guard recompiles."))  # fmt: skip
    return panes


def _graph_index(graph, gms) -> int | None:
    ids = {id(gm.graph): i for i, gm in enumerate(gms)}
    for node in graph.nodes:
        for _, gid in compat.fx_node_origins(node):
            if gid in ids:
                return ids[gid]
    return None


def aot_panes(rec, src: Source) -> tuple[list[Pane], list[dict]]:
    """One pane per compiled graph (forward or backward), with saved tensors tagged."""
    panes, infos = [], []
    graphs = rec["post_grad"]
    fwd_of: dict[int, int] = {}  # dynamo graph index -> compile index of its forward
    for ci, graph in enumerate(graphs):
        backward = any(n.op == "placeholder" and n.name.startswith("tangents") for n in graph.nodes)
        gi = _graph_index(graph, rec["gms"])
        if gi is None:  # a backward without from_node: the latest forward without a backward yet
            gi = next((g for g in sorted(fwd_of, reverse=True) if not any(i["gi"] == g and i["backward"]
                                                                          for i in infos)), 0)  # fmt: skip
        infos.append({"ci": ci, "gi": gi, "backward": backward, "graph": graph})
        if not backward:
            fwd_of.setdefault(gi, ci)
    saved_by_fwd: dict[int, set[str]] = {}
    for info in infos:
        if info["backward"] and info["gi"] in fwd_of:
            names = {n.name for n in info["graph"].nodes if n.op == "placeholder" and not n.name.startswith("tangents")}
            saved_by_fwd[fwd_of[info["gi"]]] = names
    by_seq = _roots_by_seq_nr(infos)
    for info in infos:
        ci, gi, graph, backward = info["ci"], info["gi"], info["graph"], info["backward"]
        key, fwd_key = f"real.aot{ci}", f"real.aot{fwd_of.get(gi, ci)}"
        fx_ids = {f"real.fx{gi}:{n.name}" for n in rec["gms"][gi].graph.nodes} if gi < len(rec["gms"]) else set()
        fx_by_line = _fx_nodes_by_line(rec["gms"][gi], gi, src) if gi < len(rec["gms"]) else {}

        def sources(node, key=key, fwd_key=fwd_key, backward=backward, gi=gi, fx_ids=fx_ids, fx_by_line=fx_by_line):
            roots = [f"real.fx{gi}:{name}" for name, _ in compat.fx_node_origins(node)]
            roots = [r for r in roots if r in fx_ids]
            if roots:
                return roots, True
            if backward and node.op == "placeholder" and not node.name.startswith("tangents"):
                return [f"{fwd_key}:{node.name}"], True  # a saved tensor: the forward node of that name
            same_op = [f"real.fx{gi}:{n}" for n in by_seq.get((gi, node.meta.get("seq_nr")), ())]
            if same_op and all(i in fx_ids for i in same_op):
                return same_op, True  # made by the same autograd op (seq_nr) as nodes that have from_node
            line = line_of_stack_trace(node.meta.get("stack_trace"), src)
            if line and fx_by_line.get(line):
                return fx_by_line[line], False  # the Dynamo nodes of that line: which one is not recorded
            if line:
                return [line], True
            if node.op == "placeholder" and node.name.startswith("primals"):
                idx = int(node.name.split("_")[1]) - 1
                phs = [n for n in rec["gms"][gi].graph.nodes if n.op == "placeholder"] if fx_ids else []
                return ([f"real.fx{gi}:{phs[idx].name}"], True) if idx < len(phs) else ([src.def_id], False)
            if node.op == "placeholder":  # a tangent: the gradient of the forward's outputs
                return [f"{fwd_key}:{n.name}" for n in _outputs(graph_of(rec, fwd_key))], False
            return [f"{key}:{n.name}" for n in input_nodes(node)], False

        lines = graph_lines(graph, key, sources)
        saved = saved_by_fwd.get(ci, set())
        for ln in lines:
            if ln.id.split(":", 1)[1] in saved:
                ln.tag = "saved"
        kind = "backward" if backward else "forward"
        title = f"AOT {kind} graph (post-grad ATen), Dynamo graph {gi}"
        note = f"{len(saved)} saved tensors (marked)" if saved else ""
        panes.append(Pane(key, "real", "aot", title, lines, "python", note))
        info["key"] = key
    return panes, infos


def _roots_by_seq_nr(infos) -> dict:
    """``(dynamo graph, seq_nr) -> Dynamo node names`` from every node that has ``from_node``.

    Autograd numbers each forward op (``seq_nr``) and gives its backward nodes the same number."""
    out: dict = {}
    for info in infos:
        for node in info["graph"].nodes:
            seq = node.meta.get("seq_nr")
            roots = [name for name, _ in compat.fx_node_origins(node)]
            if seq is not None and roots:
                out.setdefault((info["gi"], seq), [])
                out[(info["gi"], seq)] += [r for r in roots if r not in out[(info["gi"], seq)]]
    return out


def _fx_nodes_by_line(gm, gi: int, src: Source) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for node in gm.graph.nodes:
        line = line_of_stack_trace(node.meta.get("stack_trace"), src)
        if line and node.op not in ("placeholder", "output"):
            out.setdefault(line, []).append(f"real.fx{gi}:{node.name}")
    return out


def graph_of(rec, key: str):
    return rec["post_grad"][int(key.split("aot")[1])]


def _outputs(graph) -> list:
    out = next(n for n in graph.nodes if n.op == "output")
    return input_nodes(out)[:1]


def kernel_panes(rec, infos) -> list[Pane]:
    """Inductor's generated kernels (C++ on CPU) and the wrapper that calls them."""
    panes = []
    for info, code, origins in zip(infos, rec["codes"], rec["kernels"]):
        key, ci = info["key"], info["ci"]
        known = {n.name for n in info["graph"].nodes}
        origin_ids = {k: [f"{key}:{n}" for n in v if n in known] for k, v in origins.items()}
        ops = {n.name: op_name(n.target) for n in info["graph"].nodes if n.op == "call_function"}
        lines = []
        for name, kind, body in compat.inductor_code_kernels(code):
            srcs = tuple(origin_ids.get(name, ()))
            fused = ", ".join(s.split(":", 1)[1] for s in srcs)
            lines.append(Line(f"real.k{ci}:{name}", f"// kernel {name} ({kind}) fuses: {fused}", srcs, True, "kernel"))
            kops = [(i, ops.get(i.split(":", 1)[1], "")) for i in srcs]
            for j, text in enumerate(body.splitlines()):
                if text.strip():
                    lines.append(Line(f"real.k{ci}:{name}:{j}", text, tuple(matching(text, kops)) or srcs, False))
        panes.append(Pane(f"real.k{ci}", "real", "kernels", f"Inductor kernels for {key.split('.')[1]}", lines, "cpp",
                          "Kernel origins are exact; a line inside a fused kernel links to all its origins."))  # fmt: skip
        wlines = []
        for j, text in enumerate(compat.inductor_code_wrapper_call(code).splitlines()):
            srcs: list[str] = []
            for called in _CALL.findall(text):
                if called in origin_ids:
                    srcs += origin_ids[called] + ([f"real.k{ci}:{called}"] if "." not in called else [])
                else:
                    srcs += next((v for k, v in origin_ids.items() if k.endswith(called) and "." in k), [])
            wlines.append(Line(f"real.w{ci}:{j}", text, tuple(dict.fromkeys(srcs))))
        panes.append(Pane(f"real.w{ci}", "real", "wrapper", f"Inductor wrapper for {key.split('.')[1]}", wlines,
                          "python", "Allocations, library calls (extern_kernels) and kernel launches."))  # fmt: skip
    return panes


def panes(fn, args, src: Source, train: bool) -> tuple[list[Pane], dict]:
    rec = capture(fn, args, train)
    out = dynamo_panes(rec, src)
    aot, infos = aot_panes(rec, src)
    out += aot + kernel_panes(rec, infos)
    return out, rec
