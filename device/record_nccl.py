"""Record NCCL collectives on two (or more) GPUs of one host for Module 5 (issue 11).

Usage:  python device/record_nccl.py OUT_DIR            # NCCL, one process per GPU (needs >= 2 GPUs)
        python device/record_nccl.py OUT_DIR --dry-run  # gloo on CPU, 2 processes, small sizes

Writes OUT_DIR/nccl_collectives.json (all_reduce, all_gather, reduce_scatter; sizes 1 KiB..1 GiB;
algbw and busbw as nccl-tests define them, doc/PERFORMANCE.md) and OUT_DIR/topology.txt
(``nvidia-smi topo -m``). NVLink multicast (NVLS) stays off: NCCL_NVLS_ENABLE=0 is forced here
and in every child process. Runs in well under 4 minutes on 2 H200s.
"""

from __future__ import annotations

import os
import pathlib
import socket
import subprocess
import sys
import time

os.environ["NCCL_NVLS_ENABLE"] = "0"
os.environ["TORCH_SYMM_MEM_DISABLE_MULTICAST"] = "1"
os.environ["NVSHMEM_DISABLE_NVLS"] = "1"

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

# busbw factor per collective for p ranks (nccl-tests, doc/PERFORMANCE.md)
BUS_FACTOR = {
    "all_reduce": lambda p: 2 * (p - 1) / p,
    "all_gather": lambda p: (p - 1) / p,
    "reduce_scatter": lambda p: (p - 1) / p,
}


def sizes(dry_run: bool) -> list[int]:
    top = 1 << 20 if dry_run else 1 << 30
    out, s = [], 1 << 10
    while s <= top:
        out.append(s)
        s *= 4 if dry_run else 2
    return out


def _iters(nbytes: int, dry_run: bool) -> tuple[int, int]:
    if dry_run:
        return 1, 3
    return (5, 50) if nbytes <= 1 << 22 else (3, 20) if nbytes <= 1 << 27 else (2, 5)


def worker(rank: int, world: int, port: int, dry_run: bool, out_path: str) -> None:
    import warnings

    import torch
    import torch.distributed as dist

    warnings.filterwarnings("ignore", category=FutureWarning)  # *_tensor collectives renamed in torch 2.13
    backend = "gloo" if dry_run else "nccl"
    device = torch.device("cpu") if dry_run else torch.device("cuda", rank)
    if not dry_run:
        torch.cuda.set_device(device)
    dist.init_process_group(backend, init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    sync = (lambda: None) if dry_run else torch.cuda.synchronize
    rows = []
    for nbytes in sizes(dry_run):
        n = nbytes // 4  # float32 elements in the full buffer
        full = torch.ones(n, device=device)
        shard = torch.ones(n // world, device=device)
        ops = {
            "all_reduce": lambda: dist.all_reduce(full),
            "all_gather": lambda: dist.all_gather_into_tensor(full, shard),
            "reduce_scatter": lambda: dist.reduce_scatter_tensor(shard, full),
        }
        for name, op in ops.items():
            warm, iters = _iters(nbytes, dry_run)
            for _ in range(warm):
                op()
            sync()
            dist.barrier()
            t0 = time.perf_counter()
            for _ in range(iters):
                op()
            sync()
            sec = (time.perf_counter() - t0) / iters
            t = torch.tensor([sec], dtype=torch.float64, device=device)
            dist.all_reduce(t, op=dist.ReduceOp.MAX)  # the slowest rank defines the collective's time
            sec = float(t.item())
            algbw = nbytes / sec
            rows.append({"op": name, "bytes": nbytes, "seconds": sec, "algbw_gbs": algbw / 1e9,
                         "busbw_gbs": algbw * BUS_FACTOR[name](world) / 1e9})  # fmt: skip
    if rank == 0:
        from course_lib import recorded

        meta = {"command": "python device/record_nccl.py OUT" + (" --dry-run" if dry_run else ""),
                "backend": backend, "world_size": world, "NCCL_NVLS_ENABLE": os.environ.get("NCCL_NVLS_ENABLE")}  # fmt: skip
        if not dry_run:
            meta["nccl"] = ".".join(map(str, torch.cuda.nccl.version()))
        recorded.save(out_path, {"rows": rows, "world_size": world, "backend": backend}, meta=meta)
    dist.barrier()
    dist.destroy_process_group()


def main(argv: list[str]) -> int:
    import torch
    import torch.multiprocessing as mp

    out_dir = pathlib.Path(argv[1] if len(argv) > 1 and not argv[1].startswith("--") else "rec/nccl")
    dry_run = "--dry-run" in argv
    if not dry_run and (not torch.cuda.is_available() or torch.cuda.device_count() < 2):
        print(f"needs >= 2 GPUs (found {torch.cuda.device_count() if torch.cuda.is_available() else 0}); "
              "run with --dry-run for the gloo CPU check")  # fmt: skip
        return 2
    out_dir.mkdir(parents=True, exist_ok=True)
    if not dry_run:
        topo = subprocess.run(["nvidia-smi", "topo", "-m"], capture_output=True, text=True)
        (out_dir / "topology.txt").write_text(topo.stdout + topo.stderr)
    world = 2 if dry_run else torch.cuda.device_count()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    t = time.time()
    mp.spawn(worker, args=(world, port, dry_run, str(out_dir / "nccl_collectives.json")), nprocs=world, join=True)
    print(
        f"recorded {out_dir / 'nccl_collectives.json'} in {time.time() - t:.1f}s ({'gloo dry run' if dry_run else 'nccl'})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
