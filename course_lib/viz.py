"""Shared rendering for the labs: graphs, highlighted IR, side-by-side panes, diffs, tables.

Every view is a small object that prints as plain text (``str``: what tests and golden files
compare) and renders richly in JupyterLab (``_repr_html_`` / ``_repr_svg_``). Output is
deterministic: no absolute paths, no memory addresses, no tool versions.

* :func:`graph`  Graphviz DOT -> inline SVG; without the ``dot`` binary, the DOT text and a
  sentence saying what is missing.
* :func:`code`   one IR or source text, highlighted (Python, LLVM IR, PTX, C/C++, x86 and AMDGCN
  assembly, SASS, and MLIR for Triton's TTIR/TTGIR through a small lexer of our own).
* :func:`panes`  two or more texts side by side (e.g. TTIR | TTGIR | PTX).
* :func:`diff`   a line diff between two stages of a pipeline.
* :func:`table`  rows as an HTML table / aligned text.
* :func:`interact` an ipywidgets control over a plain function; without ipywidgets, one plain
  call with the starting values and a sentence saying what is missing.
"""

from __future__ import annotations

import dataclasses
import difflib
import html
import inspect
import re
import shutil
import subprocess
from collections.abc import Iterable, Sequence
from typing import Any

from pygments import highlight
from pygments.filter import simplefilter
from pygments.formatters import HtmlFormatter
from pygments.lexer import RegexLexer, bygroups
from pygments.lexers import get_lexer_by_name
from pygments.token import Comment, Error, Keyword, Name, Number, Operator, Punctuation, String, Text

# ----------------------------------------------------------------------------- lexers


class MLIRLexer(RegexLexer):
    """MLIR's generic textual form, enough for Triton's TTIR and TTGIR.

    ``%values`` and ``^blocks``, ``#attribute`` aliases (TTGIR's layouts), ``!types``,
    ``dialect.op`` names (``tt.load``, ``arith.addf``, ``ttg.convert_layout``), builtin types
    (``tensor<128xf32, #blocked>``), and ``loc(...)`` source locations shown as comments.
    """

    name = "MLIR"
    aliases = ["mlir", "ttir", "ttgir"]
    filenames = ["*.mlir", "*.ttir", "*.ttgir"]

    tokens = {
        "root": [
            (r"//.*?$", Comment.Single),
            (r"\bloc\((?:[^()]|\([^()]*\))*\)", Comment.Special),
            (r'"(\\\\|\\"|[^"])*"', String),
            (r"%[\w.$#:-]+", Name.Variable),
            (r"\^[\w.$-]+", Name.Label),
            (r"#[\w.$-]+", Name.Decorator),
            (r"![\w.$-]+", Keyword.Type),
            (r"@[\w.$-]+", Name.Function),
            (r"\b(func|module|return|scf|cf)\b(?!\.)", Keyword),
            (r"\b([a-z_][\w]*)(\.)([\w.]+)", bygroups(Name.Namespace, Punctuation, Name.Builtin)),
            (r"\b(tensor|memref|vector|ptr|tuple)\b", Keyword.Type),
            (r"\b([iuf]\d+|bf16|f8E\w+|index|none)\b", Keyword.Type),
            (r"\b(true|false)\b", Keyword.Constant),
            (r"-?0x[0-9a-fA-F]+", Number.Hex),
            (r"-?\d+\.\d*(e[+-]?\d+)?", Number.Float),
            (r"-?\d+", Number.Integer),
            (r"[=:,()\[\]{}<>]|->", Punctuation),
            (r"[+*/-]", Operator),
            (r"\s+", Text),
            (r"\w+", Name),
            (r".", Text),
        ]
    }


class SASSLexer(RegexLexer):
    """NVIDIA SASS as ``cuobjdump -sass`` / ``nvdisasm`` print it."""

    name = "SASS"
    aliases = ["sass"]

    tokens = {
        "root": [
            (r"/\*[0-9a-f]{4,}\*/", Comment.Special),  # instruction offsets
            (r"/\*.*?\*/", Comment.Multiline),
            (r"//.*?$", Comment.Single),
            (r"@!?U?P[T\d]+", Keyword.Pseudo),  # predicates
            (r"\.[A-Za-z_][\w.$]*:?", Name.Label),
            (r"\b[A-Z][A-Z0-9_]*(\.[A-Z0-9_]+)*\b(?=\s|;)", Name.Builtin),  # opcodes
            (r"\bU?R[Z\d]+\b|\bU?P[T\d]+\b|\bSR_\w+\b", Name.Variable),  # registers
            (r"c\[0x[0-9a-f]+\]", Name.Constant),
            (r"-?0x[0-9a-fA-F]+", Number.Hex),
            (r"-?\d+(\.\d+)?", Number),
            (r"[\[\](),;|]", Punctuation),
            (r"\s+", Text),
            (r".", Text),
        ]
    }


_LEXER_NAMES = {
    "python": "python",
    "llvm": "llvm",
    "ptx": "ptx",
    "c": "c",
    "cpp": "cpp",
    "asm": "gas",
    "x86": "gas",
    "amdgcn": "gas",
    "text": "text",
}
LANGUAGES = tuple(sorted(set(_LEXER_NAMES) | {"mlir", "ttir", "ttgir", "sass"}))


def _errors_as_text(self, lexer, stream, options):
    """Pygments filter: words a lexer does not know (LLVM's newer keywords such as ``nneg`` or
    ``captures``) are shown as plain text instead of boxed in red."""
    for ttype, value in stream:
        yield (Text if ttype is Error else ttype), value


def lexer_for(lang: str):
    """The pygments lexer for a course language name (see :data:`LANGUAGES`)."""
    lang = lang.lower()
    if lang in ("mlir", "ttir", "ttgir"):
        lexer = MLIRLexer()
    elif lang == "sass":
        lexer = SASSLexer()
    elif lang in _LEXER_NAMES:
        lexer = get_lexer_by_name(_LEXER_NAMES[lang])
    else:
        raise ValueError(f"unknown language {lang!r}; choose one of {', '.join(LANGUAGES)}")
    lexer.add_filter(simplefilter(_errors_as_text)())
    return lexer


_FORMATTER = HtmlFormatter(noclasses=True, nowrap=True, style="default")


def highlight_html(text: str, lang: str) -> str:
    """Highlighted HTML (inline styles, so it survives notebook sanitising)."""
    return highlight(text, lexer_for(lang), _FORMATTER)


# ----------------------------------------------------------------------------- code views

# white-space:pre and word-break:normal override JupyterLab's output CSS (pre-wrap + break-all),
# which broke lines inside identifiers ("prim als_2") and pushed SASS columns out of line: a long
# line scrolls sideways instead, so columns stay aligned.
_PRE = (
    "margin:0;padding:6px;font-size:12px;line-height:1.35;overflow:auto;"
    "white-space:pre;word-break:normal;overflow-wrap:normal;"
    "max-height:{h}px;background:#f8f8f8;border:1px solid #ddd"
)


@dataclasses.dataclass(frozen=True)
class CodeView:
    text: str
    lang: str = "text"
    title: str = ""
    max_height: int = 420

    def __str__(self) -> str:
        head = f"--- {self.title} ---\n" if self.title else ""
        return head + self.text

    def _repr_html_(self) -> str:
        body = highlight_html(self.text, self.lang)
        head = f"<div style='font-weight:bold;font-size:12px'>{html.escape(self.title)}</div>" if self.title else ""
        return f"<div style='min-width:0;flex:1'>{head}<pre style='{_PRE.format(h=self.max_height)}'>{body}</pre></div>"


def code(text: str, lang: str = "text", title: str = "", max_height: int = 420) -> CodeView:
    """One highlighted text; ``lang`` is one of :data:`LANGUAGES`."""
    lexer_for(lang)  # fail early on an unknown language
    return CodeView(str(text), lang, title, max_height)


@dataclasses.dataclass(frozen=True)
class Panes:
    views: tuple[CodeView, ...]

    def __str__(self) -> str:
        return "\n\n".join(str(v) for v in self.views)

    def _repr_html_(self) -> str:
        inner = "".join(v._repr_html_() for v in self.views)
        return f"<div style='display:flex;gap:8px;align-items:flex-start'>{inner}</div>"


def panes(items: Iterable[Sequence[str]] | dict[str, Any], lang: str = "text", max_height: int = 420) -> Panes:
    """Texts side by side. ``items``: ``[(title, text, lang), ...]`` or ``{title: text}``."""
    if isinstance(items, dict):
        items = [(title, text, lang) for title, text in items.items()]
    views = []
    for item in items:
        if isinstance(item, CodeView):
            views.append(item)
            continue
        title, text, *rest = item
        views.append(code(str(text), rest[0] if rest else lang, str(title), max_height))
    if not views:
        raise ValueError("panes() needs at least one text")
    return Panes(tuple(views))


# ----------------------------------------------------------------------------- diffs


@dataclasses.dataclass(frozen=True)
class DiffView:
    lines: tuple[str, ...]
    titles: tuple[str, str]
    lang: str

    @property
    def added(self) -> int:
        return sum(1 for line in self.lines if line.startswith("+") and not line.startswith("+++"))

    @property
    def removed(self) -> int:
        return sum(1 for line in self.lines if line.startswith("-") and not line.startswith("---"))

    def __str__(self) -> str:
        if not self.lines:
            return f"{self.titles[0]} and {self.titles[1]} are identical"
        return "\n".join(self.lines)

    def _repr_html_(self) -> str:
        if not self.lines:
            return f"<i>{html.escape(str(self))}</i>"
        colours = {"+": "#e6ffec", "-": "#ffebe9", "@": "#ddf4ff"}
        rows = []
        for line in self.lines:
            bg = colours.get(line[:1], "transparent")
            body = (
                highlight_html(line[1:], self.lang)
                if line[:1] in " +-" and not line.startswith(("+++", "---"))
                else html.escape(line[1:])
            )
            rows.append(
                f"<div style='background:{bg}'><span style='color:#888'>{html.escape(line[:1])}</span>{body}</div>"
            )
        summary = f"<div style='font-size:12px'>+{self.added} −{self.removed} lines</div>"
        return f"{summary}<pre style='{_PRE.format(h=500)}'>{''.join(rows)}</pre>"


def diff(
    a: str, b: str, lang: str = "text", titles: tuple[str, str] = ("before", "after"), context: int = 2
) -> DiffView:
    """The line diff from ``a`` to ``b`` (unified format, ``context`` lines around changes)."""
    lines = difflib.unified_diff(str(a).splitlines(), str(b).splitlines(), titles[0], titles[1], lineterm="", n=context)
    return DiffView(tuple(lines), titles, lang)


# ----------------------------------------------------------------------------- graphs

_SVG_NOISE = [
    re.compile(r"<!-- Generated by graphviz[^>]*-->\n?"),
    re.compile(r"<\?xml[^>]*\?>\n?"),
    re.compile(r"<!DOCTYPE[^>]*>\n?", re.S),
]
MISSING_DOT = (
    "Graphviz's `dot` program is not installed, so this graph is shown as its DOT text. "
    "Install it (`sudo apt-get install graphviz`, or `conda install graphviz`) to see the picture."
)


@dataclasses.dataclass(frozen=True)
class GraphView:
    source: str
    engine: str = "dot"

    @property
    def svg(self) -> str | None:
        """The rendered SVG, or None when ``dot`` is missing."""
        return _render_svg(self.source, self.engine)

    def __str__(self) -> str:
        return self.source

    def _repr_svg_(self) -> str | None:
        return self.svg

    def _repr_html_(self) -> str:
        svg = self.svg
        if svg is not None:
            return svg
        return f"<div><i>{html.escape(MISSING_DOT)}</i><pre>{html.escape(self.source)}</pre></div>"

    def _repr_mimebundle_(self, include=None, exclude=None):
        svg = self.svg
        if svg is not None:
            return {"image/svg+xml": svg, "text/plain": "<graph>"}
        return {"text/html": self._repr_html_(), "text/plain": MISSING_DOT + "\n" + self.source}


def _render_svg(source: str, engine: str) -> str | None:
    exe = shutil.which(engine)
    if exe is None:
        return None
    proc = subprocess.run([exe, "-Tsvg"], input=source, capture_output=True, text=True, timeout=60)
    if proc.returncode != 0:
        raise ValueError(f"Graphviz could not render this graph: {proc.stderr.strip()}")
    svg = proc.stdout
    for pattern in _SVG_NOISE:
        svg = pattern.sub("", svg)
    return svg


def graph(dot: Any, engine: str = "dot") -> GraphView:
    """A graph from DOT text, or from any object with a ``.source`` (``graphviz.Digraph``)."""
    source = dot.source if hasattr(dot, "source") else str(dot)
    if not re.match(r"\s*(strict\s+)?(di)?graph\b", source):
        raise ValueError("graph() expects DOT text starting with 'digraph' or 'graph'")
    return GraphView(source, engine)


def dot_escape(text: str, record: bool = True) -> str:
    """Escape text for a quoted DOT label; lines end with ``\\l`` (left-justified).

    ``record=True`` also escapes the characters that structure ``shape=record`` labels
    (braces, angle brackets, bars); plain box labels need only quotes and backslashes escaped.
    """
    out = str(text).replace("\\", "\\\\").replace('"', '\\"')
    if record:
        for ch in "{}<>|":
            out = out.replace(ch, "\\" + ch)
    return out.replace("\n", "\\l")


# ----------------------------------------------------------------------------- tables


@dataclasses.dataclass(frozen=True)
class TableView:
    rows: tuple[tuple[str, ...], ...]
    headers: tuple[str, ...]
    title: str = ""

    def __str__(self) -> str:
        cols = [self.headers, *self.rows] if self.headers else list(self.rows)
        widths = [max(len(r[i]) for r in cols) for i in range(len(cols[0]))] if cols else []
        fmt = "  ".join(f"{{:<{w}}}" for w in widths)
        lines = [self.title] if self.title else []
        if self.headers:
            lines += [fmt.format(*self.headers), "  ".join("-" * w for w in widths)]
        lines += [fmt.format(*r) for r in self.rows]
        return "\n".join(lines)

    __repr__ = __str__

    def _repr_html_(self) -> str:
        esc = html.escape
        head = "".join(f"<th>{esc(h)}</th>" for h in self.headers)
        body = "".join("<tr>" + "".join(f"<td>{esc(c)}</td>" for c in r) + "</tr>" for r in self.rows)
        cap = f"<caption>{esc(self.title)}</caption>" if self.title else ""
        return f"<table>{cap}<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _cell(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def table(rows: Iterable[Sequence[Any]], headers: Sequence[str] = (), title: str = "") -> TableView:
    """Rows (sequences of values) as a table; floats print with 4 significant digits."""
    rows = tuple(tuple(_cell(v) for v in r) for r in rows)
    headers = tuple(str(h) for h in headers)
    width = len(headers) if headers else (len(rows[0]) if rows else 0)
    for r in rows:
        if len(r) != width:
            raise ValueError(f"table row {r!r} has {len(r)} cells; expected {width}")
    return TableView(rows, headers, title)


# ----------------------------------------------------------------------------- FX graphs

_OP_COLOURS = {
    "placeholder": "#d2e3fc",
    "get_attr": "#e8f0fe",
    "call_function": "#fef7e0",
    "call_method": "#fce8b2",
    "call_module": "#e6f4ea",
    "output": "#f1f3f4",
}


def _node_inputs(arg: Any):
    if hasattr(arg, "op") and hasattr(arg, "name"):
        yield arg
    elif isinstance(arg, (list, tuple)):
        for a in arg:
            yield from _node_inputs(a)
    elif isinstance(arg, dict):
        for a in arg.values():
            yield from _node_inputs(a)


def _target_name(node: Any) -> str:
    target = node.target
    if isinstance(target, str):
        return target
    name = getattr(target, "__name__", None) or str(target)
    module = getattr(target, "__module__", "") or ""
    if module.startswith("torch._ops") or str(target).startswith("aten."):
        return str(target)
    return name


def legend_label(title: str, legend: dict[str, str]) -> str:
    """A DOT HTML-like graph label: the title, then one coloured swatch per meaning."""
    esc = html.escape
    swatches = "".join(
        f'<td bgcolor="{esc(colour)}" border="1" width="16" height="14" fixedsize="true"></td>'
        f'<td align="left">{esc(meaning)}  </td>'
        for meaning, colour in legend.items()
    )
    head = f'<tr><td colspan="{2 * len(legend)}">{esc(title)}</td></tr>' if title else ""
    return f'<<table border="0" cellspacing="2" cellpadding="2">{head}<tr>{swatches}</tr></table>>'


def fx_graph(
    graph: Any,
    title: str = "",
    highlight: dict[str, str] | None = None,
    rankdir: str = "TB",
    legend: dict[str, str] | None = None,
    detail: Any = None,
) -> GraphView:
    """A picture of an FX graph: one box per node (name, opcode, target), edges for data flow.

    Works for ``torch.fx.GraphModule`` / ``torch.fx.Graph`` and for any graph with the same
    node fields (``op``, ``name``, ``target``, ``args``, ``kwargs``), such as course_lib.fx's.
    ``highlight`` maps node names to fill colours (e.g. saved tensors); ``legend`` maps what a
    colour means to the colour, drawn under the title (wherever colour carries meaning).
    ``detail(node) -> str``, when given, adds a last line to each box (e.g. the shape ShapeProp found).
    """
    g = getattr(graph, "graph", graph)
    highlight = highlight or {}
    lines = [
        f'digraph fx {{ rankdir={rankdir}; node [shape=box, style="rounded,filled", fontname="monospace", fontsize=10];'
    ]
    if legend:
        lines.append(f"label={legend_label(title, legend)}; labelloc=t; fontsize=10;")
    elif title:
        lines.append(f'label="{dot_escape(title)}"; labelloc=t;')
    for node in g.nodes:
        text = "" if node.op in ("placeholder", "output") else f"\n{_target_name(node)}"
        extra = detail(node) if detail is not None else ""
        text += f"\n{extra}" if extra else ""
        label = dot_escape(f"{node.name}\n[{node.op}]{text}", record=False).replace("\\l", "\\n")
        fill = highlight.get(node.name, _OP_COLOURS.get(node.op, "white"))
        lines.append(f'  "{node.name}" [label="{label}", fillcolor="{fill}"];')
    for node in g.nodes:
        seen = set()
        for src in _node_inputs((node.args, node.kwargs)):
            if src.name not in seen:
                seen.add(src.name)
                lines.append(f'  "{src.name}" -> "{node.name}";')
    lines.append("}")
    return GraphView("\n".join(lines))


# ----------------------------------------------------------------------------- widgets

MISSING_IPYWIDGETS = (
    "ipywidgets is not installed, so this shows one setting ({args}); call {name}(...) with other values to explore."
)


@dataclasses.dataclass(frozen=True)
class Knob:
    """One control of :func:`interact`: a slider, a choice of options, a checkbox, or a fixed value.

    Plain data, so a notebook can describe its controls without importing ipywidgets.
    """

    kind: str  # "slider" | "choice" | "check" | "fixed"
    value: Any
    options: tuple[Any, ...] = ()
    bounds: tuple[int, int, int] = (0, 0, 1)  # min, max, step (sliders)
    style: str = "dropdown"  # choices: "dropdown" | "slider" | "toggle"
    label: str = ""


def slider(lo: int, hi: int, step: int = 1, value: int | None = None, label: str = "") -> Knob:
    """An integer slider from ``lo`` to ``hi``; starts at ``value`` (default ``lo``)."""
    if hi < lo or step <= 0:
        raise ValueError(f"slider({lo}, {hi}, {step}): want lo <= hi and step > 0")
    start = lo if value is None else value
    if not lo <= start <= hi:
        raise ValueError(f"slider value {start} is outside [{lo}, {hi}]")
    return Knob("slider", start, bounds=(lo, hi, step), label=label)


def choice(options: Sequence[Any], value: Any = None, style: str = "dropdown", label: str = "") -> Knob:
    """One of ``options`` (a dropdown, a slider over the options, or toggle buttons)."""
    options = tuple(options)
    if not options:
        raise ValueError("choice() needs at least one option")
    if style not in ("dropdown", "slider", "toggle"):
        raise ValueError(f"choice style {style!r}: choose 'dropdown', 'slider' or 'toggle'")
    start = options[0] if value is None else value
    if start not in options:
        raise ValueError(f"choice value {start!r} is not one of {options!r}")
    return Knob("choice", start, options=options, style=style, label=label)


def fixed(value: Any) -> Knob:
    """A value passed as it is, with no control."""
    return Knob("fixed", value)


def _as_knob(name: str, spec: Any, default: Any) -> Knob:
    """Shorthands as in ipywidgets.interact: a list is a choice, ``(lo, hi[, step])`` a slider,
    a bool a checkbox. The function's own default is the starting value when it is allowed."""
    if isinstance(spec, Knob):
        return spec
    if isinstance(spec, bool):
        return Knob("check", spec)
    if isinstance(spec, list):
        return choice(spec, default if default in spec else None)
    if isinstance(spec, tuple) and len(spec) in (2, 3) and all(isinstance(v, int) for v in spec):
        lo, hi, *step = spec
        start = default if isinstance(default, int) and lo <= default <= hi else None
        return slider(lo, hi, step[0] if step else 1, start)
    raise ValueError(f"interact: knob {name}={spec!r} is not a list, a (lo, hi[, step]) tuple, a bool or a viz.Knob")


def _widget(ipywidgets: Any, name: str, knob: Knob) -> Any:
    desc = knob.label or name
    if knob.kind == "fixed":
        return ipywidgets.fixed(knob.value)
    if knob.kind == "check":
        return ipywidgets.Checkbox(value=knob.value, description=desc)
    if knob.kind == "slider":
        lo, hi, step = knob.bounds
        return ipywidgets.IntSlider(
            value=knob.value, min=lo, max=hi, step=step, description=desc, continuous_update=False
        )
    widget = {"dropdown": ipywidgets.Dropdown, "slider": ipywidgets.SelectionSlider, "toggle": ipywidgets.ToggleButtons}
    kwargs = {"continuous_update": False} if knob.style == "slider" else {}
    return widget[knob.style](options=list(knob.options), value=knob.value, description=desc, **kwargs)


def _show(value: Any) -> None:
    if value is None:
        return
    try:
        from IPython.display import display
    except ImportError:
        print(value)
    else:
        display(value)


def interact(fn: Any, /, **knobs: Any) -> None:
    """Controls for ``fn``'s keyword arguments; moving one calls ``fn`` again and shows its output.

    ``fn`` stays a plain function that tests and nbval call directly; this is the thin layer over
    it. Knobs: :func:`slider`, :func:`choice`, :func:`fixed`, or the ipywidgets shorthands (a
    list, a ``(lo, hi[, step])`` tuple, a bool). Without ipywidgets (or outside a notebook), ``fn``
    is called once with the starting values and its result shown, with a sentence saying so.
    Returns None, so a cell ending in ``viz.interact(...)`` prints nothing extra.
    """
    if not callable(fn):
        raise TypeError(f"interact() needs a function, not {type(fn).__name__}")
    params = inspect.signature(fn).parameters
    unknown = [k for k in knobs if k not in params and not any(p.kind is p.VAR_KEYWORD for p in params.values())]
    if unknown:
        raise ValueError(f"interact: {getattr(fn, '__name__', 'the function')} has no argument {', '.join(unknown)}")
    specs = {}
    for name, spec in knobs.items():
        default = params[name].default if name in params else inspect.Parameter.empty
        specs[name] = _as_knob(name, spec, default)
    try:
        import ipywidgets
    except ImportError:
        ipywidgets = None
    if ipywidgets is None:
        shown = ", ".join(f"{k}={v.value!r}" for k, v in specs.items() if v.kind != "fixed")
        print(MISSING_IPYWIDGETS.format(args=shown or "the defaults", name=getattr(fn, "__name__", "the function")))
        _show(fn(**{k: v.value for k, v in specs.items()}))
        return None
    ipywidgets.interact(fn, **{k: _widget(ipywidgets, k, v) for k, v in specs.items()})
    return None
