"""The explorer's page: one self-contained HTML file (no server, no network, no CDN).

Layout: the summary strip (per stage, what the course and the real tool made), then the Python
source, then two columns of collapsible panes, course on the left and real on the right, in
pipeline order. A click on any line highlights the lines it came from (blue) and the lines it
became (orange) in every pane, opens the panes that hold them and scrolls each to its first hit.
The search box marks matching lines and jumps between them. Panes over ``COLLAPSE_OVER`` lines
start closed so a large model's page opens quickly.

The provenance travels as one JSON object ``{line id: [source ids]}``; the script builds the
reverse map once and walks both with a breadth-first search, as :class:`Exploration` does.
"""

from __future__ import annotations

import html
import json

from course_lib.explore.model import Exploration, Pane

COLLAPSE_OVER = 300

_CSS = """
body{font:13px/1.35 system-ui,sans-serif;margin:0;overflow-x:hidden;color:#222;background:#fafafa}
header{padding:8px 12px;background:#263238;color:#eceff1}
header h1{font-size:16px;margin:0 0 4px 0}
#bar{position:sticky;top:0;z-index:5;background:#eceff1;padding:6px 12px;border-bottom:1px solid #cfd8dc}
#bar input{width:260px}
#bar button{margin-left:4px}
table.sum{border-collapse:collapse;margin:6px 12px;font-size:12px}
table.sum td,table.sum th{border:1px solid #cfd8dc;padding:2px 8px;text-align:left}
.notes{margin:4px 12px;font-size:12px;color:#555}
.cols{display:grid;grid-template-columns:minmax(0,1fr) minmax(0,1fr);gap:8px;padding:0 8px 40px 8px}
.col h2{font-size:14px;margin:8px 4px}
details.pane{background:#fff;border:1px solid #cfd8dc;border-radius:4px;margin:6px 0}
details.pane>summary{cursor:pointer;padding:4px 8px;background:#eceff1;font-weight:600}
details.pane>summary .n{font-weight:400;color:#607d8b;margin-left:6px}
details.pane>summary .hits{font-weight:400;color:#e65100;margin-left:6px}
.pnote{font-size:11px;color:#607d8b;padding:2px 8px}
.code{font:12px/1.3 ui-monospace,Menlo,Consolas,monospace;max-height:420px;overflow:auto;padding:2px 0}
.ln{white-space:pre;padding:0 8px;cursor:pointer;border-left:3px solid transparent}
.ln:hover{background:#f1f8e9}
.ln.approx{color:#455a64}
.ln.kernel{font-weight:600;background:#f3e5f5}
.ln.saved{background:#fff8e1}
.ln.saved::after{content:"  \\2190 saved for backward";color:#f57f17}
.ln.up{background:#bbdefb;border-left-color:#1565c0}
.ln.down{background:#ffe0b2;border-left-color:#e65100}
.ln.sel{background:#c8e6c9;border-left-color:#2e7d32;font-weight:600}
.ln.match{outline:1px dashed #6a1b9a}
#python .code{max-height:none}
"""

_JS = """
(function(){
const SRC = JSON.parse(document.getElementById('prov').textContent);
const DATA = new Set(JSON.parse(document.getElementById('data-edges').textContent));
const DOWN = {};
for (const id in SRC) if (!DATA.has(id)) for (const s of SRC[id]) (DOWN[s] = DOWN[s] || []).push(id);
const byId = {};
document.querySelectorAll('.ln').forEach(el => { byId[el.dataset.id] = el; });
function walk(start, next) {
  const seen = new Set([start]), todo = [start];
  while (todo.length) { const cur = todo.pop();
    for (const n of (next[cur] || [])) if (!seen.has(n)) { seen.add(n); todo.push(n); } }
  seen.delete(start); return seen;
}
function clear() { document.querySelectorAll('.ln.up,.ln.down,.ln.sel').forEach(
  el => el.classList.remove('up', 'down', 'sel'));
  document.querySelectorAll('summary .hits').forEach(el => el.textContent = ''); }
function select(id) {
  clear();
  const up = walk(id, SRC), down = walk(id, DOWN), panes = new Map();
  const mark = (set, cls) => set.forEach(i => { const el = byId[i]; if (!el) return;
    el.classList.add(cls); const p = el.closest('details');
    if (!panes.has(p)) panes.set(p, el); });
  mark(up, 'up'); mark(down, 'down');
  const me = byId[id]; if (me) me.classList.add('sel');
  panes.forEach((first, p) => { p.open = true;
    const n = p.querySelectorAll('.ln.up,.ln.down').length;
    p.querySelector('summary .hits').textContent = n + ' linked';
    const box = p.querySelector('.code');
    if (me && box.contains(me)) return;
    box.scrollTop = first.offsetTop - box.offsetTop - 20; });
  document.getElementById('status').textContent =
    id + ': came from ' + up.size + ' lines, became ' + down.size + ' lines';
  window.__explore_selected = {id: id, up: [...up], down: [...down]};
}
document.addEventListener('click', ev => { const el = ev.target.closest('.ln');
  if (el) select(el.dataset.id); });
let hits = [], at = -1;
function search(q) {
  document.querySelectorAll('.ln.match').forEach(el => el.classList.remove('match'));
  hits = []; at = -1; if (!q) { document.getElementById('status').textContent = ''; return; }
  const ql = q.toLowerCase();
  document.querySelectorAll('.ln').forEach(el => {
    if (el.textContent.toLowerCase().includes(ql)) { el.classList.add('match'); hits.push(el); } });
  document.getElementById('status').textContent = hits.length + ' matches for ' + q;
}
function nextHit() { if (!hits.length) return; at = (at + 1) % hits.length; const el = hits[at];
  const p = el.closest('details'); p.open = true; const box = p.querySelector('.code');
  box.scrollTop = el.offsetTop - box.offsetTop - 20; el.scrollIntoView({block: 'nearest'}); }
const box = document.getElementById('q');
box.addEventListener('input', () => search(box.value));
box.addEventListener('keydown', ev => { if (ev.key === 'Enter') nextHit(); });
document.getElementById('openall').onclick = () => document.querySelectorAll('details.pane').forEach(d => d.open = true);
document.getElementById('closeall').onclick = () => document.querySelectorAll('details.pane').forEach(d => d.open = false);
document.getElementById('clear').onclick = () => { clear(); document.getElementById('status').textContent = ''; };
window.__explore_select = select;
window.__explore_ready = performance.now();
})();
"""


def _pane_html(p: Pane, open_: bool) -> str:
    rows = []
    for ln in p.lines:
        cls = "ln" + ("" if ln.exact else " approx") + (f" {ln.tag}" if ln.tag in ("kernel", "saved") else "")
        title = " title='approximate link'" if not ln.exact and ln.sources else ""
        rows.append(
            f"<div class='{cls}' data-id='{html.escape(ln.id, quote=True)}'{title}>{html.escape(ln.text)}</div>"
        )
    note = f"<div class='pnote'>{html.escape(p.note)}</div>" if p.note else ""
    return (
        f"<details class='pane' data-key='{html.escape(p.key, quote=True)}' data-stage='{p.stage}'{' open' if open_ else ''}>"
        f"<summary>{html.escape(p.title)}<span class='n'>{len(p.lines)} lines</span><span class='hits'></span></summary>"
        f"{note}<div class='code'>{''.join(rows)}</div></details>"
    )


def render(ex: Exploration, open_stages: tuple[str, ...] | None = None) -> str:
    """The page; ``open_stages`` (e.g. ``("fx", "guards")``) opens only those panes at first."""
    prov = {ln.id: list(ln.sources) for p in ex.panes for ln in p.lines if ln.sources}
    summary = "".join(
        f"<tr><td>{html.escape(s)}</td><td>{html.escape(c)}</td><td>{html.escape(r)}</td></tr>"
        for s, c, r in ex.summary
    )
    notes = "".join(f"<li>{html.escape(n)}</li>" for n in ex.notes)
    python = [p for p in ex.panes if p.side == "both"]
    cols = []
    for side, head in (("course", "course_lib"), ("real", "real stack (torch.compile / Inductor)")):
        panes = [p for p in ex.panes if p.side == side]
        opened = [(len(p.lines) <= COLLAPSE_OVER) if open_stages is None else (p.stage in open_stages) for p in panes]
        body = "".join(_pane_html(p, o) for p, o in zip(panes, opened)) or "<p>(not compiled)</p>"
        cols.append(f"<div class='col' id='col-{side}'><h2>{head}</h2>{body}</div>")
    data = json.dumps(prov, separators=(",", ":")).replace("</", "<\\/")
    via_data = json.dumps([ln.id for p in ex.panes for ln in p.lines if ln.via == "data"]).replace("</", "<\\/")
    return (
        "<!DOCTYPE html><html><head><meta charset='utf-8'>"
        f"<title>explore: {html.escape(ex.name)}</title><style>{_CSS}</style></head><body>"
        f"<header><h1>Stack explorer: {html.escape(ex.name)}</h1>"
        "Click any line: blue = what it came from, orange = what it became. Grey text = approximate link.</header>"
        "<div id='bar'><input id='q' placeholder='search all panes (Enter: next)'>"
        "<button id='openall'>open all</button><button id='closeall'>close all</button>"
        "<button id='clear'>clear</button> <span id='status'></span></div>"
        f"<table class='sum'><tr><th>stage</th><th>course</th><th>real</th></tr>{summary}</table>"
        f"<ul class='notes'>{notes}</ul>"
        f"<div id='python' style='padding:0 8px'>{''.join(_pane_html(p, True) for p in python)}</div>"
        f"<div class='cols'>{''.join(cols)}</div>"
        f"<script type='application/json' id='prov'>{data}</script>"
        f"<script type='application/json' id='data-edges'>{via_data}</script><script>{_JS}</script></body></html>"
    )


def inline(ex: Exploration, height: int = 720, open_stages: tuple[str, ...] | None = None) -> str:
    """The page inside an ``<iframe srcdoc>``: its script and styles stay out of the notebook's."""
    return (
        f'<iframe srcdoc="{html.escape(render(ex, open_stages), quote=True)}" '
        f"style='width:100%;height:{height}px;border:1px solid #cfd8dc' sandbox='allow-scripts'></iframe>"
    )
