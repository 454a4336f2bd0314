"""Compile course_lib's generated Triton kernels with another Triton, no GPU needed.

The GPU machine runs an older Triton (3.6) than this one (3.9), and the two can compile the same kernel
very differently: 3.6 moved every value of the first row split through shared memory where 3.9 did not
(bench/notes/gpu_long_rows.md). With a Python that has the other Triton (``python -m venv /tmp/t36 &&
/tmp/t36/bin/pip install triton==3.6.0``), this reports what that Triton makes of each kernel: PTX lines,
shared memory, ptxas's registers and spills, and the layout conversions of big tiles (``ttg.convert_layout``
of a tensor of 1024 elements or more, which go through shared memory):

    .venv/bin/python bench/compile_other_triton.py --python /tmp/t36/bin/python [--row-split] [softmax_xlong ...]
        [ROW_SPLIT_AHEAD=1 ROW_SPLIT_WARPS=32 ...]   (codegen/triton.py constants, set before generating)
        [--dump DIR]   (each kernel's Triton source, TTGIR and PTX, as DIR/<workload>_<kernel>[_<choice>].{py,ttgir,ptx})

A row split's site compiles each of its ``choices`` (the two protocols, ``FLAGS``) at its first launch and keeps
the first that fits the most programs an SM; this compiles each choice too and says which an sm_90 would keep.

Step one (this Python) generates the kernels for the workloads of bench_gpu_inductor.py (8 rows, the real
row lengths) and writes their sources and signatures to a JSON file; step two (the other Python, run as
``--compile FILE``) compiles them for sm_90 with the divisibility a launch with aligned tensors gets.
"""

from __future__ import annotations

import itertools
import json
import math
import os
import pathlib
import subprocess
import sys
import tempfile

ROWS = {"softmax": 4096, "layernorm": 4096, "layernorm_long": 32768, "softmax_long": 32768,
        "layernorm_xlong": 65536, "softmax_xlong": 65536}  # fmt: skip


def generate(names, row_split: bool, constants: dict | None = None) -> list[dict]:
    import torch
    import torch.nn.functional as F
    from bench_gpu_inductor import _tiling  # (this file's folder is on sys.path when run as a script)

    import course_lib.inductor as ind
    from course_lib import compat, decomp

    fns = {
        "softmax": lambda x, w, b: (torch.softmax(x, -1),),
        "layernorm": lambda x, w, b: (F.layer_norm(x, (x.shape[-1],), w, b),),
    }
    jobs = []
    with _tiling(row_split_available=lambda: row_split, **(constants or {})):
        for name in names:
            n = ROWS[name]
            x, w, b = torch.randn(8, n), torch.randn(n), torch.randn(n)
            fn = fns[name.split("_")[0]]
            c = ind.compile_graph(
                compat.make_fx(fn, x, w, b, decompositions=decomp.DECOMPOSITIONS), [x, w, b], codegen="triton"
            )
            module = c.call.__globals__["kernel0"].__globals__
            source = pathlib.Path(module["__file__"]).read_text()
            for k in c.schedule.kernels:
                if k.kind != "kernel":
                    continue
                launch = c.call.__globals__[k.name]
                # a row split's site compiles each of its choices (DirectLaunch.pick): so does this, one job each
                choices = enumerate(getattr(launch, "choices", ()) or ({},))
                for (stage, _, warps), (index, choice) in itertools.product(launch.stages, choices):
                    jobs.append({"workload": name, "kernel": stage, "source": source, "num_warps": warps,
                                 "signature": launch.signature, "constexprs": {**launch.constexprs, **choice},
                                 "maxnreg": launch.options.get("maxnreg", 0),  # the site's own (ROW_SPLIT_MAXNREG)
                                 "choice": ", ".join(f"{k}={v}" for k, v in choice.items()),
                                 "choice_index": index})  # fmt: skip
    return jobs


def compile_all(path: str, dump: str | None = None) -> None:
    """Runs under the other Python: compile each job, print one line each (and write its source,
    TTGIR and PTX to ``dump``)."""
    import importlib.util
    import re

    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    bin_dir = pathlib.Path(triton.__file__).parent / "backends" / "nvidia" / "bin"
    ptxases = [
        bin_dir / n for n in ("ptxas", "ptxas-blackwell") if (bin_dir / n).exists()
    ]  # the first that takes the PTX
    print(f"triton {triton.__version__}")
    with tempfile.TemporaryDirectory() as d:
        for i, job in enumerate(json.loads(pathlib.Path(path).read_text())):
            src = job["source"].replace("from course_lib.inductor.launcher import DirectLaunch", "")
            src = "\n".join(ln for ln in src.splitlines() if not ln.startswith(("site_", "import torch")))
            file = pathlib.Path(d) / f"k{i}.py"
            file.write_text(src.split("\n\ndef launch_")[0])
            spec = importlib.util.spec_from_file_location(f"k{i}", file)
            mod = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(mod)
            fn = getattr(mod, job["kernel"])
            names, sig = fn.arg_names, job["signature"]
            consts = {(names.index(k),): v for k, v in job["constexprs"].items()}
            attrs = {(j,): [["tt.divisibility", 16]] for j, a in enumerate(names) if sig[a] != "constexpr"}
            compiled = triton.compile(ASTSource(fn, {a: sig[a] for a in names}, constexprs=consts, attrs=attrs),
                                      target=GPUTarget("cuda", 90, 32), options={"num_warps": job["num_warps"], **({"maxnreg": job["maxnreg"]} if job.get("maxnreg") else {})})  # fmt: skip
            ptx = compiled.asm["ptx"]
            big = [ln for ln in compiled.asm["ttgir"].splitlines() if "convert_layout" in ln
                   and any(math.prod(int(d) for d in s.split("x")) >= 1024 for s in re.findall(r"tensor<([0-9x]+)xf32", ln))]  # fmt: skip
            (pathlib.Path(d) / "k.ptx").write_text(ptx)
            if dump:
                tag = job["choice"].replace("=", "").replace(", ", "_")
                stem = pathlib.Path(dump) / "_".join(filter(None, (job["workload"], job["kernel"], tag)))
                for ext, text in (("py", src), ("ttgir", compiled.asm["ttgir"]), ("ptx", ptx)):
                    stem.with_suffix("." + ext).write_text(text)
            text = ""
            for ptxas in ptxases:
                out = subprocess.run([str(ptxas), "-v", "-arch=sm_90a", str(pathlib.Path(d) / "k.ptx"), "-o",
                                      str(pathlib.Path(d) / "k.cubin")], capture_output=True, text=True)  # fmt: skip
                text = out.stdout + out.stderr
                if out.returncode == 0:
                    break
            regs = re.search(r"Used (\d+) registers", text)
            spills = re.search(r"(\d+) bytes spill stores", text)
            print(f"{job['workload']:16} {job['kernel']:10} {job['choice']:11} warps {job['num_warps']:2}  "
                  f"PTX {len(ptx.splitlines()):5} lines  shared {compiled.metadata.shared:6} B  "
                  f"registers {regs.group(1) if regs else '?':>3}  spilled {spills.group(1) if spills else '?':>4} B  "
                  f"big layout conversions {len(big)}", flush=True)  # fmt: skip
            if regs:  # for the parent's prediction of each site's choice
                print(
                    RESULT
                    + json.dumps(
                        {
                            **{k: job[k] for k in ("workload", "kernel", "choice", "choice_index", "num_warps")},
                            "registers": int(regs.group(1)),
                            "shared": compiled.metadata.shared,
                        }
                    ),
                    flush=True,
                )


RESULT = "#result "


def predict_choices(results: list[dict], arch: str = "sm_90") -> list[str]:
    """What each row split's site would keep on an ``arch`` GPU (DirectLaunch.pick's rule): the first
    choice whose binary fits the most programs an SM, by the occupancy calculator of Module 5b."""
    from course_lib.gpu.occupancy_calculator import occupancy

    by_site: dict = {}
    for r in results:
        if r["choice"]:
            by_site.setdefault((r["workload"], r["kernel"]), []).append(r)
    lines = []
    for (workload, kernel), rows in by_site.items():
        rows.sort(key=lambda r: r["choice_index"])
        held = [occupancy(arch, 32 * r["num_warps"], r["registers"], r["shared"]).blocks_per_sm for r in rows]
        keep = rows[held.index(max(held))]
        options = ", ".join(f"{r['choice']}: {n} an SM ({r['registers']} registers)" for r, n in zip(rows, held))
        lines.append(f"{workload} {kernel}: keeps {keep['choice']} on {arch} ({options})")
    return lines


def main(argv: list[str]) -> None:
    if argv[:1] == ["--compile"]:
        compile_all(argv[1], argv[2] if len(argv) > 2 else None)
        return
    python = argv[argv.index("--python") + 1] if "--python" in argv else sys.executable
    names = [a for a in argv if a in ROWS] or list(ROWS)
    constants = {k: int(v) for k, v in (a.split("=", 1) for a in argv if "=" in a)}
    jobs = generate(names, "--row-split" in argv, constants)
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(jobs, f)
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}  # course_lib sets it on a CPU
    dump = [str(pathlib.Path(argv[argv.index("--dump") + 1]).resolve())] if "--dump" in argv else []
    if dump:
        pathlib.Path(dump[0]).mkdir(parents=True, exist_ok=True)
    out = subprocess.run([python, __file__, "--compile", f.name, *dump], check=True, env=env, capture_output=True,
                         text=True)  # fmt: skip
    results = [json.loads(ln[len(RESULT) :]) for ln in out.stdout.splitlines() if ln.startswith(RESULT)]
    print("\n".join(ln for ln in out.stdout.splitlines() if not ln.startswith(RESULT)))
    print("\n".join(predict_choices(results)))


if __name__ == "__main__":
    main(sys.argv[1:])
