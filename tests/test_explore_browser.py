"""The explorer page in a real browser: click an FX node, see its kernel and PTX lines lit.

Headless Chromium through Playwright, offline, with a fresh profile. Skipped (with the reason)
where Chromium or Playwright is missing. The page-open time is measured by ``make bench``
(bench/bench_explore.py), not asserted here.
"""

from __future__ import annotations

import pytest

from course_lib.explore import browser, explore
from course_lib.tour import make_inputs, model

pytestmark = pytest.mark.skipif(browser.missing() is not None, reason=f"browser test: {browser.missing()}")


@pytest.fixture(scope="module")
def page_file(tmp_path_factory):
    ex = explore(model, *make_inputs())
    path = tmp_path_factory.mktemp("explore") / "tour.html"
    ex.save(path)
    return ex, path


def _lit(pg, selector: str) -> int:
    return pg.locator(selector).count()


def test_click_fx_node_lights_kernel_and_ptx(page_file):
    ex, path = page_file
    gelu = next(ln for ln in ex.pane("course.fx0").lines if "gelu" in ln.text and ln.text.startswith("gelu"))
    with browser.page() as pg:
        browser.open_time(pg, path)
        pg.click(f"div.ln[data-id='{gelu.id}']")
        assert _lit(pg, f"div.ln.sel[data-id='{gelu.id}']") == 1
        assert _lit(pg, "details[data-stage='kernels'] .ln.down") > 0  # the C++ kernel computing it
        assert _lit(pg, "details[data-stage='triton'] .ln.down") > 0  # the Triton kernel
        assert _lit(pg, "details[data-stage='ptx'] .ln.down") > 0  # its PTX
        assert _lit(pg, "#python .ln.up") >= 1  # and the Python line it came from
        # the page agrees with the Python model of the same links
        down = set(pg.evaluate("window.__explore_selected.down"))
        assert down == {i for i in ex.downstream(gelu.id)}
        # the PTX panes were opened to show what lit up
        assert pg.locator("details[data-stage='ptx'][open]").count() >= 1


def test_real_side_links_fx_to_inductor_kernel(page_file):
    ex, path = page_file
    node = next(ln for ln in ex.pane("real.fx0").lines if ln.text.startswith("gelu"))
    with browser.page() as pg:
        browser.open_time(pg, path)
        pg.click(f"div.ln[data-id='{node.id}']")
        assert _lit(pg, "#col-real details[data-stage='aot'] .ln.down") > 0
        assert _lit(pg, "#col-real details[data-stage='kernels'] .ln.down") > 0


def test_click_ptx_line_goes_back_to_python_and_search_finds(page_file):
    ex, path = page_file
    ptx = next(ln for ln in ex.ptx_lines() if ln.exact and "erf" not in ln.text and ex.python_lines(ln.id))
    with browser.page() as pg:
        browser.open_time(pg, path)
        pg.evaluate("id => window.__explore_select(id)", ptx.id)
        lit = pg.evaluate("() => [...document.querySelectorAll('#python .ln.up')].map(e => e.dataset.id)")
        assert sorted(int(i[3:]) - ex.first_line + 1 for i in lit) == ex.python_lines(ptx.id)
        pg.fill("#q", "tl.store")
        assert _lit(pg, ".ln.match") >= 1
