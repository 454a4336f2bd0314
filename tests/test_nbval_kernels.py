"""The repository's conftest.py: how kernels start under nbval (Unix sockets; a retry that reports)."""

from __future__ import annotations

import json
import os
import sys

import pytest

kernel = pytest.importorskip("nbval.kernel")


def test_kernels_talk_over_unix_sockets_at_an_absolute_path(tmp_path):
    km, kc = kernel.start_new_kernel(kernel_name="python3", cwd=str(tmp_path), startup_timeout=60)
    try:
        assert km.transport == "ipc"
        assert os.path.isabs(km.ip), km.ip  # the kernel runs in another folder than the client
        assert os.path.exists(f"{km.ip}-{km.shell_port}")
        msg_id = kc.execute("import os; print(os.getcwd())")
        reply = kc.get_shell_msg(timeout=30)
        assert reply["parent_header"]["msg_id"] == msg_id and reply["content"]["status"] == "ok"
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
    assert not os.path.exists(f"{km.ip}-{km.shell_port}")  # the socket files are removed
    assert not list(tmp_path.iterdir())  # and nothing lands in the notebook's folder


def test_a_kernel_that_dies_at_start_is_retried_and_its_stderr_reported(tmp_path, monkeypatch):
    spec = tmp_path / "kernels" / "dies"
    spec.mkdir(parents=True)
    script = "import sys; sys.stderr.write('address taken, giving up\\n'); sys.exit(3)"
    spec.joinpath("kernel.json").write_text(
        json.dumps({"argv": [sys.executable, "-c", script, "{connection_file}"], "display_name": "dies"})
    )
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path))
    with pytest.raises(RuntimeError) as info:
        kernel.start_new_kernel(kernel_name="dies", startup_timeout=30)
    text = str(info.value)
    assert "Kernel died before replying to kernel_info" in text
    assert "3 attempts" in text and "address taken, giving up" in text
