"""Replay a compiled graph's whole ``call`` as one CUDA graph (``mode="reduce-overhead"``, much simplified).

Teaches ``torch/_inductor/cudagraph_trees.py`` (what ``torch.compile(mode="reduce-overhead")`` uses):
the CPU cost of a small model's step is one Python line and one launch per kernel; a CUDA graph
records every launch of one ``call`` once and the driver replays them all from a single call.

The contract a CUDA graph imposes: a replay reads and writes exactly the addresses that were
recorded. So (as Inductor does with its static inputs) parameters and the outputs of another
recorded graph (a forward's saved tensors handed to the backward) are read in place, and every
other tensor input is copied into a buffer the graph owns before each replay; the outputs are the
graph's own buffers, overwritten by the next replay.

Simplified against cudagraph_trees: one graph per compiled graph (no tree of graphs sharing one
memory pool), a static input whose address changes sends that call down the ordinary path instead
of re-recording, and nothing detects a read of an output that a later replay overwrote (cudagraph
trees raise on it). So it suits a loop that alternates forward and backward, as a training step does;
it is off by default: ``COURSE_CUDAGRAPHS=1`` turns it on, on a GPU only.

Position: the wrapper's ``call(args)`` (:func:`course_lib.inductor.codegen.wrapper.make_call`) ->
``torch.cuda.CUDAGraph`` capture on the second call -> ``replay()`` from the third.
"""

from __future__ import annotations

import os
import weakref

ENV = "COURSE_CUDAGRAPHS"

#: Addresses of every recorded graph's outputs: an input found here is another graph's static output
#: (a saved activation), read in place rather than copied. Only grows; a stale address is harmless,
#: because every replay checks that a static input is still at its recorded address.
_GRAPH_OUTPUTS: set[int] = set()
_RUNNERS: weakref.WeakSet = weakref.WeakSet()  # live CudaGraphCalls, for summary()


def summary() -> dict:
    """Over every live CudaGraphCall: how many recorded a graph, replays, normal calls, refusals."""
    runners = list(_RUNNERS)
    return {"graphs": sum(r.graph is not None for r in runners), "replays": sum(r.replays for r in runners),
            "eager_calls": sum(r.eager_calls for r in runners),
            "refused": sorted({r.refused for r in runners if r.refused})}  # fmt: skip


def enabled(device) -> bool:
    import torch

    return os.environ.get(ENV) == "1" and torch.device(device).type == "cuda"


def _ptr(a):
    return a.data_ptr() if hasattr(a, "data_ptr") else None


class CudaGraphCall:
    """``call(args)`` run normally once (Triton compiles and binds its launchers), recorded on the
    second call, replayed after. ``replays`` / ``eager_calls`` count what happened; ``refused`` says
    why recording was given up (the graph then always runs normally)."""

    def __init__(self, call):
        self.call = call
        self.graph = None
        self.warm = False  # the first call ran normally
        self.static: list[bool] = []  # input i keeps its address: used in place
        self.inputs: list = []  # what the recorded call read (owned copies for non-static inputs)
        self.outputs = None
        self.replays = 0
        self.eager_calls = 0
        self.refused: str | None = None
        _RUNNERS.add(self)

    def __call__(self, args):
        if self.refused is not None:
            return self._eager(args)
        if self.graph is None:
            if not self.warm:  # first call: Triton compiles and binds its launchers (never inside a capture)
                self.warm = True
                return self._eager(args)
            try:
                return self._record(args)
            except Exception as exc:  # an op that cannot be captured: keep running normally
                self.refused = f"{type(exc).__name__}: {exc}".splitlines()[0]
                self.graph = None
                return self._eager(args)
        for i, a in enumerate(args):
            if self.static[i]:
                ptr = _ptr(a)
                # a static input that moved (or a scalar that changed): the recording would read stale values
                if ptr != _ptr(self.inputs[i]) or (ptr is None and a != self.inputs[i]):
                    return self._eager(args)
            else:
                self.inputs[i].copy_(a)
        self.graph.replay()
        self.replays += 1
        return self.outputs

    def _eager(self, args):
        self.eager_calls += 1
        return self.call(args)

    def _record(self, args):
        import torch

        self.static = [_ptr(a) is None or isinstance(a, torch.nn.Parameter) or _ptr(a) in _GRAPH_OUTPUTS for a in args]
        self.inputs = [a if keep else torch.empty_strided(a.shape, a.stride(), dtype=a.dtype, device=a.device).copy_(a)
                       for a, keep in zip(args, self.static, strict=True)]  # fmt: skip
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            outputs = self.call(list(self.inputs))
        self.graph, self.outputs = graph, outputs
        _GRAPH_OUTPUTS.update(_ptr(o) for o in outputs if _ptr(o) is not None)
        graph.replay()  # recording ran nothing: this replay computes the call's results
        self.replays += 1
        return outputs


def install(glb: dict, device, sizevars=None) -> None:
    """Make ``glb["call"]`` (a wrapper's globals after exec) replay through a CudaGraphCall when
    :func:`enabled` and the sizes are static; the generated ``call`` stays as ``eager_call``, and the
    new ``call`` keeps ``glb`` as its globals (tools read the kernels from there)."""
    if not enabled(device) or getattr(sizevars, "symbols", None):
        return
    glb["eager_call"], glb["cudagraph"] = glb["call"], CudaGraphCall(glb["call"])
    exec(compile("def call(args):\n    return cudagraph(args)\n", "<course_lib.inductor cudagraph>", "exec"), glb)
