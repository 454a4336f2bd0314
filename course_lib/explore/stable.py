"""Run-varying names in the real tools' output, replaced by stable ones before a learner sees them.

Dynamo names the globals it installs in a frame from process-wide counters, a uuid or an object's
``id()`` (``torch/_dynamo/bytecode_transformation.py``'s ``unique_id``, ``output_graph.py``'s
``install_global`` and ``install_global_by_id``). The same function therefore prints as
``__compiled_fn_8_2df1f039_...`` in one run and ``__compiled_fn_22_fc97dddb_...`` after a few other
compiles, and ``dis`` shows a nested function as ``<code object g at 0x7f.., file "/tmp/...">``.

Each rule below keeps the stable part of such a name (the *stem*) and replaces the varying part:

* a counter, uuid or id becomes the name's rank among the distinct names with that stem, in the
  order Dynamo made them (its counter), within one recording: the first compiled graph of a
  compile is ``__compiled_fn_1``, the second ``__compiled_fn_2``; one raw name always gets the same
  stable name, so the same global keeps one name in every pane of that recording;
* an address or an absolute path is dropped; an ``id()`` in guard code becomes ``<id>``.

A *recording* is one run of the real tool. The explorer's guards come from ``torch._dynamo.explain``
and its bytecode from a second compile; each numbers from 1, so the builtins dict that the guards
call ``__builtins_dict___1`` is the one the bytecode loads as ``__builtins_dict___1`` too.
"""

from __future__ import annotations

import dataclasses
import re

from course_lib.explore.model import Pane


@dataclasses.dataclass(frozen=True)
class Rule:
    """``pattern`` names the kept part ``stem`` (and may name ``order``: Dynamo's counter, which
    says which of two names was made first). ``template`` builds the replacement; ``{n}`` in it is
    the name's rank among the names of its stem."""

    what: str
    pattern: re.Pattern
    template: str

    @property
    def numbered(self) -> bool:
        return "{n}" in self.template


def _rule(what: str, pattern: str, template: str) -> Rule:
    return Rule(what, re.compile(pattern), template)


_UUID = r"[0-9a-f]{8}_[0-9a-f]{4}_[0-9a-f]{4}_[0-9a-f]{4}_[0-9a-f]{12}"

# One rule per row; where two rules match at the same place the upper one wins (a code object's
# address goes with its rule, not with the plain address rule below it).
# fmt: off
RULES: tuple[Rule, ...] = (
    _rule("compiled graph: unique_id + uuid",       rf"\b(?P<stem>__compiled_fn)_(?P<order>\d+)_{_UUID}\b", "{stem}_{n}"),
    _rule("resume function: unique_id",             r"\b(?P<stem>__resume_at_\d+)_(?P<order>\d+)\b", "{stem}_{n}"),
    _rule("install_global: unique_id",              r"\b(?P<stem>__builtins_dict__|__warnings_warn_wrapper|"
                                                    r"__gen_rand_values)_(?P<order>\d+)\b", "{stem}_{n}"),
    _rule("list comprehension: unique_id",          r"\b(?P<stem>__comprehension_\w+?_at_\d+)_(?P<order>\d+)\b",
                                                    "{stem}_{n}"),
    _rule("context manager: unique_id",             r"\b(?P<stem>___context_manager_\d+)_(?P<order>\d+)\b", "{stem}_{n}"),
    _rule("install_global_by_id: id + compile id",  r"\b(?P<stem>\w*?)_\d{8,}_c(?P<order>\d+)\b", "{stem}_id{n}"),
    _rule("code object: address + file",           r'<code object (?P<stem>\S+) at 0x[0-9a-f]+, file "[^"]*", '
                                                    r"line (?P<line>\d+)>", "<code object {stem}, line {line}>"),
    _rule("guard code: id() of an object or type",  r"\b(?P<stem>___check_(?:obj|type)_id)\((?P<arg>.*?), \d+\)",
                                                    "{stem}({arg}, <id>)"),
    _rule("object address",                         r" at 0x[0-9a-f]+(?P<stem>)", ""),
)
# fmt: on


def _matches(text: str):
    """``(rule, match)`` for each run-varying piece of ``text``, left to right; where two rules
    match at the same place, the one higher in the table wins."""
    if "__" not in text and "0x" not in text and "_c" not in text:  # every rule needs one of these
        return
    pos = 0
    while pos <= len(text):
        hits = [(m.start(), i, m) for i, r in enumerate(RULES) if (m := r.pattern.search(text, pos))]
        if not hits:
            return
        _, i, m = min(hits, key=lambda h: h[:2])
        yield RULES[i], m
        pos = max(m.end(), m.start() + 1)


@dataclasses.dataclass
class Renamer:
    """Stable names for one recording. :meth:`of` reads every text of the recording first, so the
    ranks follow Dynamo's counters (the order it made the names), not the order panes print them."""

    rank: dict[str, int] = dataclasses.field(default_factory=dict)  # raw name -> its rank in its stem

    @classmethod
    def of(cls, texts) -> Renamer:
        by_stem: dict[tuple[str, str], dict[str, tuple[int, int]]] = {}  # (rule, stem) -> raw -> sort key
        for j, (rule, m) in enumerate((r, m) for text in texts for r, m in _matches(text)):
            if rule.numbered:
                order = int(m["order"]) if m.re.groupindex.get("order") else 0
                by_stem.setdefault((rule.what, m["stem"]), {}).setdefault(m[0], (order, j))
        out = cls()
        for names in by_stem.values():
            out.rank.update({raw: n for n, raw in enumerate(sorted(names, key=names.get), start=1)})
        return out

    def _replace(self, rule: Rule, m: re.Match) -> str:
        fields = {k: v for k, v in m.groupdict().items() if v is not None}
        if rule.numbered:
            if m[0] not in self.rank:  # a name the learnt texts did not have: the next rank of its stem
                same = [r for r in self.rank if (hit := rule.pattern.fullmatch(r)) and hit["stem"] == m["stem"]]
                self.rank[m[0]] = len(same) + 1
            fields["n"] = self.rank[m[0]]
        return rule.template.format(**fields)

    def __call__(self, text: str) -> str:
        out, pos = [], 0
        for rule, m in _matches(text):
            out += [text[pos : m.start()], self._replace(rule, m)]
            pos = m.end()
        return "".join(out) + text[pos:]


def stable_text(text: str) -> str:
    """``text`` with its run-varying names replaced (one text is one recording)."""
    return Renamer.of([text])(text)


# Panes whose text comes from a recording of its own; every other pane belongs to its side's one.
RECORDING = {"real.guards": "torch._dynamo.explain"}


def stable_panes(panes: list[Pane]) -> list[Pane]:
    """Replace run-varying names in every line, title and note, one :class:`Renamer` per recording.

    Line ids are left as they are: they are built from FX node names and the explorer's own
    counters, which do not change from run to run."""
    groups: dict[str, list[Pane]] = {}
    for p in panes:
        groups.setdefault(RECORDING.get(p.key, p.side), []).append(p)
    for group in groups.values():
        rename = Renamer.of(t for p in group for t in (p.title, p.note, *(ln.text for ln in p.lines)))
        for p in group:
            p.title, p.note = rename(p.title), rename(p.note)
            for ln in p.lines:
                ln.text = rename(ln.text)
    return panes
