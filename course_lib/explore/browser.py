"""Open an explorer page in headless Chromium (Playwright), for the browser test and the bench.

Chromium runs offline and stateless: a fresh empty profile, no GPU, no network services. Returns
``None`` (with the reason) where Playwright or Chromium is missing, so callers can skip.
"""

from __future__ import annotations

import contextlib
import pathlib
import shutil
import tempfile

CHROMIUM = "/usr/bin/chromium"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]  # fmt: skip


def missing() -> str | None:
    """Why a browser cannot be started here, or None."""
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "playwright is not installed"
    if not (pathlib.Path(CHROMIUM).exists() or shutil.which("chromium")):
        return f"chromium is not installed ({CHROMIUM}; sudo apt-get install chromium)"
    return None


@contextlib.contextmanager
def page(viewport=(1500, 1000)):
    """A fresh Chromium page (persistent context in a new empty user-data dir)."""
    from playwright.sync_api import sync_playwright

    exe = CHROMIUM if pathlib.Path(CHROMIUM).exists() else shutil.which("chromium")
    with tempfile.TemporaryDirectory(prefix="explore-chromium-") as profile, sync_playwright() as p:
        ctx = p.chromium.launch_persistent_context(profile, executable_path=exe, args=FLAGS, headless=True,
                                                   viewport={"width": viewport[0], "height": viewport[1]})  # fmt: skip
        try:
            yield ctx.pages[0] if ctx.pages else ctx.new_page()
        finally:
            ctx.close()


def open_time(pg, path) -> dict:
    """Load ``path`` and return milliseconds to the page's script being ready and to ``load``."""
    pg.goto(pathlib.Path(path).resolve().as_uri())
    pg.wait_for_function("window.__explore_ready !== undefined")
    timing = pg.evaluate("""() => { const n = performance.getEntriesByType('navigation')[0];
        return {ready_ms: window.__explore_ready, load_ms: n.loadEventEnd, dom_ms: n.domContentLoadedEventEnd}; }""")
    return {k: round(v, 1) for k, v in timing.items()}
