"""Which line of a fused kernel computes which op: a table of textual patterns.

Neither Inductor nor course_lib.inductor records an origin per generated *line*; only per
kernel. The explorer narrows a line's links to the kernel's nodes whose op the line visibly
computes (``tl.erf(`` or ``.erf()`` or ``std::erf(`` for ``aten.erf``; `` * `` for
``aten.mul``). This is approximate by nature (two multiplies in one kernel both match both
``mul`` nodes), and a line that matches no op (index arithmetic, masks, loads) links to all of
the kernel's nodes. One rule per line, the way the code generators keep theirs.
"""

from __future__ import annotations

import re

OP_PATTERNS = {
    "add": r"[\w\)\]] \+ [\w\(]",
    "sub": r"[\w\)\]] - [\w\(]",
    "rsub": r"[\w\)\]] - [\w\(]",
    "mul": r"[\w\)\]] \* [\w\(]",
    "div": r"[\w\)\]] / [\w\(]|reciprocal",
    "neg": r"= -\w|\bneg\(",
    "erf": r"\berf\(|\.erf\(\)",
    "exp": r"\bexp2?\(|\.exp2?\(\)",
    "log": r"\blog2?\(|\.log2?\(\)",
    "tanh": r"\btanh\(|\.tanh\(\)",
    "sqrt": r"\bsqrt\(|\.sqrt\(\)",
    "rsqrt": r"\brsqrt\(|\.rsqrt\(\)|1 / .*sqrt",
    "sigmoid": r"sigmoid|\bexp",
    "pow": r"\bpow\(|\*\*|exp2",
    "maximum": r"\bmaximum\(|std::max|max\(",
    "minimum": r"\bminimum\(|std::min|min\(",
    "relu": r"\bmaximum\(|std::max|max\(",
    "sum": r"tl\.sum\(|acc\w* = acc\w* \+|tmp_acc\w* = tmp_acc\w* \+",
    "mean": r"tl\.sum\(|acc\w* = acc\w* \+|tmp_acc\w* = tmp_acc\w* \+",
    "amax": r"tl\.max\(|max_propagate_nan|std::max|maximum",
    "where": r"tl\.where\(|\? |blendv|where\(",
    "gt": r" > ", "lt": r" < ", "ge": r" >= ", "le": r" <= ", "eq": r" == ", "ne": r" != ",
    "_to_copy": r"\.to\(|static_cast|convert",
    "convert_element_type": r"\.to\(|static_cast|convert",
}  # fmt: skip


def op_name(target) -> str:
    """``aten.mul.Tensor`` -> ``mul``; ``prims.convert_element_type.default`` -> its middle part."""
    text = str(target)
    parts = text.split(".")
    return parts[1] if len(parts) >= 2 and parts[0] in ("aten", "prims") else parts[-1]


def matching(text: str, nodes: list[tuple[str, str]]) -> list[str]:
    """Ids of ``nodes`` (``(id, op)``) whose op the line ``text`` computes; [] when none match."""
    code = text.split("//")[0].split("#")[0]
    hits = []
    for node_id, op in nodes:
        pattern = OP_PATTERNS.get(op)
        if pattern and re.search(pattern, code):
            hits.append(node_id)
    return hits
