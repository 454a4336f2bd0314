"""pytest set-up for every run from the repository root; here, how nbval starts Jupyter kernels.

nbval starts one kernel per notebook. With jupyter_client's default TCP transport the client picks
five free ports by binding and releasing them, then the kernel binds them itself a moment later;
with two pytest workers (and their compile subprocesses) opening sockets, another process can take
one of those ports in between, and the kernel exits at start. nbval then reports every cell of that
notebook as "Kernel died before replying to kernel_info", with the kernel's stderr sent to
/dev/null. So kernels started under nbval here:

- talk over Unix-domain sockets (transport "ipc", in Jupyter's runtime folder under a fresh name
  for each kernel, removed at shutdown), which removes that race;
- write stderr to an anonymous file, and a kernel that still dies at start is started again (up to
  three times in all); the last failure's error carries the tail of what the kernel printed.
"""

from __future__ import annotations

import os
import tempfile
import uuid

try:
    from nbval import kernel as _nbval_kernel
except ImportError:  # nbval is a dev dependency; unit-test runs do not need it
    _nbval_kernel = None

START_ATTEMPTS = 3

if _nbval_kernel is not None:
    _start_new_kernel = _nbval_kernel.start_new_kernel

    class _UnixSocketKernelManager(_nbval_kernel.KernelManager):
        def __init__(self, **kwargs):
            kwargs.setdefault("transport", "ipc")
            # An absolute path: the kernel runs in the notebook's folder, the client in pytest's.
            kwargs.setdefault("ip", _socket_prefix())
            super().__init__(**kwargs)

    def _socket_prefix() -> str:
        from jupyter_core.paths import jupyter_runtime_dir

        name = f"nbval-{uuid.uuid4().hex[:12]}-ipc"  # the sockets are this plus "-<n>"
        folder = jupyter_runtime_dir()
        if len(os.path.join(folder, name)) > 90:  # a Unix socket's path has room for 107 bytes
            folder = tempfile.gettempdir()
        os.makedirs(folder, exist_ok=True)
        return os.path.join(folder, name)

    def _start_kernel_retrying(*args, **kwargs):
        kwargs.pop("stderr", None)  # nbval passes an open os.devnull
        for attempt in range(1, START_ATTEMPTS + 1):
            log = tempfile.TemporaryFile(mode="w+")
            try:
                return _start_new_kernel(*args, stderr=log, **kwargs)
            except RuntimeError as exc:
                log.seek(0)
                tail = "\n".join(log.read().strip().splitlines()[-15:]) or "(the kernel printed nothing)"
                log.close()
                if attempt == START_ATTEMPTS:
                    raise RuntimeError(f"{exc} ({attempt} attempts); the kernel's last stderr:\n{tail}") from exc

    _nbval_kernel.KernelManager = _UnixSocketKernelManager
    _nbval_kernel.start_new_kernel = _start_kernel_retrying
