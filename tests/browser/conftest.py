"""The real-browser test runs only through `make test-browser`, which names the Chromium to drive.

It starts JupyterLab and runs notebooks for minutes, so a plain `pytest tests` leaves it out.
"""

import os
import shutil

import pytest


def pytest_collection_modifyitems(config, items):
    chromium = os.environ.get("COURSE_BROWSER", "")
    if chromium and shutil.which(chromium):
        return
    why = "run it with `make test-browser`" if not chromium else f"COURSE_BROWSER={chromium!r} is not a program"
    for item in items:
        item.add_marker(pytest.mark.skip(reason=f"browser test: {why}"))
