"""`make lab` starts a JupyterLab that answers on localhost and lists the labs."""

import json
import os
import signal
import socket
import subprocess
import time
import urllib.request

from course_lib import env


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_make_lab_serves_the_labs_folder():
    port, token = _free_port(), "course-test"
    args = f"--no-browser --ip=127.0.0.1 --port={port} --IdentityProvider.token={token} --ServerApp.open_browser=False"
    proc = subprocess.Popen(
        ["make", "--no-print-directory", "lab", f"LAB_ARGS={args}"],
        cwd=env.repo_root(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        env={**os.environ, "JUPYTER_CONFIG_DIR": os.path.join(env.cache_dir(), "jupyter-test")},
    )
    try:
        listing, deadline = None, time.time() + 120
        while time.time() < deadline and proc.poll() is None:
            try:
                url = f"http://127.0.0.1:{port}/api/contents?token={token}"
                with urllib.request.urlopen(url, timeout=5) as resp:
                    listing = json.load(resp)
                break
            except OSError:
                time.sleep(1)
        assert listing is not None, "JupyterLab did not answer:\n" + (
            proc.stdout.read1().decode() if proc.poll() is not None else ""
        )
        names = {item["name"] for item in listing["content"]}
        expected = {p.name for p in (env.repo_root() / "labs").iterdir() if not p.name.startswith(".")}
        assert expected and expected <= names
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/lab?token={token}", timeout=10) as resp:
            assert resp.status == 200 and b"JupyterLab" in resp.read()
        # The course's overrides (jupyter-settings/overrides.json) are what this server hands out.
        plugin = "@jupyterlab/apputils-extension:notification"
        with urllib.request.urlopen(
            f"http://127.0.0.1:{port}/lab/api/settings/{plugin}?token={token}", timeout=10
        ) as resp:
            props = json.load(resp)["schema"]["properties"]
        assert props["fetchNews"]["default"] == "false" and props["checkForUpdates"]["default"] is False
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=30)
