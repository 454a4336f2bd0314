"""Benchmark: how fast the stack explorer's page opens for a two-layer transformer (issue 22).

The goal: the page opens in under two seconds in a browser. We build the exploration of a
two-layer GPT-2 (transformers, small config, random weights, no download), write the HTML,
and open it three times in headless Chromium (a fresh profile each time), recording the time
from navigation start to the page's script having wired every line (``ready_ms``) and to the
``load`` event. Also recorded: page size, number of lines and links, and how long building the
exploration took on each side. Reported, not asserted.

Run: ``make bench BENCH=explore``
"""

from __future__ import annotations

import json
import pathlib
import statistics
import tempfile
import time


def two_layer_transformer():
    import torch
    import transformers

    config = transformers.GPT2Config(n_embd=64, n_head=4, n_layer=2, n_positions=32, vocab_size=128,
                                     attn_pdrop=0.0, resid_pdrop=0.0, embd_pdrop=0.0)  # fmt: skip
    config._attn_implementation = "eager"
    torch.manual_seed(0)
    model = transformers.GPT2Model(config).eval()

    def forward(input_ids):
        return model(input_ids).last_hidden_state

    return forward, (torch.randint(0, 128, (1, 16)),)


def main(results_dir: pathlib.Path) -> None:
    from course_lib.explore import browser, explore

    fn, args = two_layer_transformer()
    t0 = time.perf_counter()
    ex = explore(fn, *args)
    build_s = time.perf_counter() - t0
    lines = sum(len(p.lines) for p in ex.panes)
    links = sum(len(ln.sources) for p in ex.panes for ln in p.lines)
    result = {"build_s": round(build_s, 1), "side_s": {k: round(v, 1) for k, v in ex.timings.items()},
              "panes": len(ex.panes), "lines": lines, "links": links, "notes": ex.notes}  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        path = pathlib.Path(tmp) / "two_layer_transformer.html"
        ex.save(path)
        result["page_bytes"] = path.stat().st_size
        why = browser.missing()
        if why:
            result["browser"] = f"skipped: {why}"
        else:
            runs = []
            for _ in range(3):
                with browser.page() as pg:
                    runs.append(browser.open_time(pg, path))
            result["open_runs"] = runs
            result["open_ms_median"] = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
    print(
        f"two-layer GPT-2: {result['panes']} panes, {lines} lines, {links} links, page {result['page_bytes'] / 1e6:.1f} MB"
    )
    print(
        f"built in {build_s:.0f} s (course {result['side_s'].get('course', 0)} s, real {result['side_s'].get('real', 0)} s)"
    )
    if "open_ms_median" in result:
        med = result["open_ms_median"]
        print(f"page open (median of 3): script ready {med['ready_ms']:.0f} ms, load {med['load_ms']:.0f} ms "
              f"(goal: under 2000 ms)")  # fmt: skip
    else:
        print(result["browser"])
    results_dir.mkdir(parents=True, exist_ok=True)
    (results_dir / "explore.json").write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main(pathlib.Path(__file__).resolve().parent / "results")
