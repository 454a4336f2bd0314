"""One test per course_lib.compat function of Module 3 (fails with a message naming the API)."""

import numpy as np
import pytest

import course_lib
from course_lib import compat
from course_lib.triton import kernels


def test_triton_ast_source():
    src = compat.triton_ast_source(*kernels.signature("add"))
    assert src.constants == {(4,): 1024}, "ASTSource no longer keys constexprs by (index,)"


def test_triton_metadata_dict():
    class Fake:
        metadata = {"num_warps": 4}

    assert compat.triton_metadata_dict(Fake()) == {"num_warps": 4}


@pytest.mark.parametrize("tool", ["cuobjdump", "nvdisasm", "ptxas"])
def test_triton_nvidia_tool(tool):
    assert compat.triton_nvidia_tool(tool).endswith(tool)


@pytest.mark.skipif(course_lib.env.has_cuda(), reason="interpreter only")
def test_triton_interpreter_scoped_device_calls():
    assert compat.triton_interpreter_scoped_device_calls(), "InterpretedFunction/_LangPatchScope changed"


def test_triton_compile_scope():
    import triton.language as tl
    from triton.runtime.jit import JITFunction

    before = tl.max
    with compat.triton_compile_scope(kernels.add_kernel):
        assert isinstance(tl.max, JITFunction)
    assert tl.max is before


@pytest.mark.skipif(course_lib.env.has_cuda(), reason="interpreter only")
def test_triton_memory_hook():
    import torch

    seen = []

    def on(kind, ptrs, mask, grid):
        seen.append((kind, ptrs.shape, grid))
        return np.asarray(mask)

    with compat.triton_memory_hook(on):
        kernels.add(torch.ones(8), torch.ones(8), block=8)
    assert [k for k, _, _ in seen] == ["load", "load", "store"], "InterpreterBuilder memory ops changed"


def test_triton_ast_source_divisibility_attrs():
    src = compat.triton_ast_source(*kernels.signature("add"), divisible_by_16=["x_ptr", "n"])
    assert src.attrs == {(0,): [["tt.divisibility", 16]], (3,): [["tt.divisibility", 16]]}, "ASTSource attrs changed"


def test_triton_language_patched_probe():
    # Outside an interpreted launch (and with the scoped fix installed) nothing is patched.
    assert compat.triton_language_patched() is False, "interpreter patches leaked, or _patch_attr changed"


@pytest.mark.skipif(course_lib.env.has_cuda(), reason="interpreter only")
def test_compile_survives_leaked_interpreter_patches(tmp_path):
    """A launch before course_lib.triton is imported leaks patches; compile_stages then uses a subprocess."""
    import os
    import subprocess
    import sys

    # A kernel in a module that does not import course_lib.triton, launched before it is imported.
    (tmp_path / "leaky_kernel.py").write_text(
        "import triton, triton.language as tl\n"
        "@triton.jit\n"
        "def rowmax(x_ptr, out_ptr, BLOCK: tl.constexpr):\n"
        "    offs = tl.arange(0, BLOCK)\n"
        "    tl.store(out_ptr, tl.max(tl.load(x_ptr + offs), axis=0))\n"
    )
    code = (
        f"import sys; sys.path.insert(0, {str(tmp_path)!r}); import torch, course_lib, leaky_kernel as k; "
        "x = torch.randn(16); out = torch.empty(1); k.rowmax[(1,)](x, out, BLOCK=16); "
        "from course_lib import compat; assert compat.triton_language_patched(), 'no leak to test'; "
        "from course_lib.triton import compile_stages; "
        "s = compile_stages(k.rowmax, {'x_ptr': '*fp32', 'out_ptr': '*fp32', 'BLOCK': 'constexpr'}, {'BLOCK': 16}); "
        "print(sorted(s))"
    )
    env = {**os.environ, "COURSE_CACHE_DIR": str(tmp_path), "PYTHONPATH": str(tmp_path)}
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=False)
    assert res.returncode == 0, res.stderr[-1500:]
    assert "'sass'" in res.stdout


def test_triton_tensor_descriptor():
    import torch

    desc = compat.triton_tensor_descriptor().from_tensor(torch.empty(24, 16, dtype=torch.float16), [8, 16])
    assert list(desc.shape) == [24, 16] and list(desc.strides) == [16, 1] and list(desc.block_shape) == [8, 16], (
        "TensorDescriptor.from_tensor no longer keeps shape / strides / block_shape"
    )


def test_triton_kernel_resources():
    class Loaded:  # what a CompiledKernel looks like once _init_handles has run on a GPU
        metadata = {"shared": 213016}
        n_regs, n_spills = 161, 0

        def _init_handles(self):
            self.loaded = True

    assert compat.triton_kernel_resources(Loaded()) == {"shared": 213016, "registers": 161, "spills": 0}


def test_triton_static_signature_of_a_real_binary():
    """``add(x_ptr, y_ptr, out_ptr, n, BLOCK: constexpr)`` compiled for sm_90 by Triton's real compiler:
    torch's static launcher passes three pointers and an int32, BLOCK is compiled in, and each scratch
    pointer this Triton adds to every kernel goes at the end as null."""
    import triton

    from course_lib.triton.compile import gpu_target

    src = compat.triton_ast_source(*kernels.signature("add"))
    with compat.triton_compile_scope(kernels.add_kernel):
        compiled = triton.compile(src, target=gpu_target("sm_90"))
    types, constants, extra, warps, shared = compat.triton_static_signature(compiled)
    assert types == "OOOi" + "O" * len(extra) and all(e is None for e in extra), "static launcher signature changed"
    assert constants == {4} and warps == compiled.metadata.num_warps and shared == compiled.metadata.shared


def test_triton_static_launcher_needs_a_cuda_torch():
    import torch

    if not hasattr(torch._C, "_StaticCudaLauncher"):
        assert compat.triton_static_launcher(object()) is None


def test_triton_cooperative_launch():
    assert compat.triton_cooperative_launch(), "CUDAOptions lost launch_cooperative_grid"


@pytest.mark.skipif(course_lib.env.has_cuda(), reason="interpreter only")
def test_triton_imported_before_course_lib(tmp_path):
    """triton imported first (torch.testing._internal does it) made tl.sum a compiled-mode JITFunction,
    which the interpreter refuses to call; importing course_lib now swaps in the interpreter's
    wrappers. A kernel with a reduction runs, and Triton's compiler still gives PTX for it."""
    import os
    import subprocess
    import sys

    (tmp_path / "rowsum_kernel.py").write_text(
        "import triton, triton.language as tl\n"
        "@triton.jit\n"
        "def rowsum(x_ptr, out_ptr, BLOCK: tl.constexpr):\n"
        "    offs = tl.arange(0, BLOCK)\n"
        "    tl.store(out_ptr, tl.sum(tl.load(x_ptr + offs), axis=0) + tl.max(tl.load(x_ptr + offs), axis=0))\n"
    )
    code = (
        f"import sys; sys.path.insert(0, {str(tmp_path)!r}); import os; os.environ.pop('TRITON_INTERPRET', None); "
        "import triton.language, torch, course_lib, rowsum_kernel as k; "
        "x = torch.randn(16); out = torch.empty(1); k.rowsum[(1,)](x, out, BLOCK=16); "
        "torch.testing.assert_close(out[0], x.sum() + x.max()); "
        "from course_lib.triton import compile_stages; "
        "s = compile_stages(k.rowsum, {'x_ptr': '*fp32', 'out_ptr': '*fp32', 'BLOCK': 'constexpr'}, {'BLOCK': 16}); "
        "print(sorted(s))"
    )
    env = {**os.environ, "COURSE_CACHE_DIR": str(tmp_path), "PYTHONPATH": str(tmp_path)}
    env.pop("TRITON_INTERPRET", None)
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=False)
    assert res.returncode == 0, res.stderr[-1500:]
    assert "'ptx'" in res.stdout
