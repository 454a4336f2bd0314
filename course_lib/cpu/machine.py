"""The machine: which SIMD extensions this CPU has, its cores and its caches, read from the system.

Teaches what ``torch/_inductor/cpu_vec_isa.py`` decides before Inductor writes a line of C++:
which vector ISA to target (``VecAVX512``, ``VecAVX2``, ``VecNEON``, ``VecSVE256``...) and so
how many float32 lanes one ``at::vec::Vectorized<float>`` holds. Inductor probes by compiling a
test program; here we read what the kernel already knows:

* ``/proc/cpuinfo``: the ``flags`` line on x86 (``avx2``, ``fma``, ``avx512f``...), the
  ``Features`` line on Arm (``asimd`` is NEON, ``sve``, ``sve2``);
* on Arm also the ELF auxiliary vector (``/proc/self/auxv``, ``AT_HWCAP``/``AT_HWCAP2``), the
  hardware-capability bits ``getauxval()`` returns;
* ``/sys/devices/system/cpu/cpu0/cache/index*/``: level, type, size, ways and line size of
  every cache, the numbers the cache lab's cliffs line up with.

Parsing is done by pure functions over text (``parse_cpuinfo``, ``parse_size``) so tests can
feed them another machine's files.
"""

from __future__ import annotations

import dataclasses
import os
import pathlib
import platform
import struct

# Rule table: (cpuinfo flag, extension name, vector register bits). Order = oldest first.
X86_EXTENSIONS = (
    ("sse2", "SSE2", 128),
    ("ssse3", "SSSE3", 128),
    ("sse4_1", "SSE4.1", 128),
    ("sse4_2", "SSE4.2", 128),
    ("avx", "AVX", 256),
    ("fma", "FMA", 256),
    ("avx2", "AVX2", 256),
    ("avx512f", "AVX-512F", 512),
    ("avx512bw", "AVX-512BW", 512),
    ("avx512vl", "AVX-512VL", 512),
    ("avx512_vnni", "AVX-512 VNNI", 512),
    ("avx512_bf16", "AVX-512 BF16", 512),
    ("amx_tile", "AMX", 512),
)
ARM_EXTENSIONS = (
    ("asimd", "NEON", 128),
    ("asimdhp", "NEON fp16", 128),
    ("sve", "SVE", 128),  # SVE's width is implementation defined (128..2048); see sve_bits
    ("sve2", "SVE2", 128),
    ("bf16", "BF16", 128),
)
# AArch64 hwcap bits (linux/arch/arm64/include/uapi/asm/hwcap.h).
AT_HWCAP, AT_HWCAP2 = 16, 26
ARM_HWCAP_BITS = {"asimd": (AT_HWCAP, 1), "asimdhp": (AT_HWCAP, 10), "sve": (AT_HWCAP, 22),
                  "sve2": (AT_HWCAP2, 1), "bf16": (AT_HWCAP2, 14)}  # fmt: skip


@dataclasses.dataclass(frozen=True)
class SimdFeatures:
    """What vector hardware this CPU has.

    ``extensions`` lists known extensions present, oldest first; ``vector_bits`` is the widest
    vector register they give; ``float32_lanes`` = ``vector_bits // 32`` is the ``8`` in
    Inductor's ``x0 += 8`` on an AVX2 machine.
    """

    arch: str
    extensions: tuple[str, ...]
    vector_bits: int
    flags: frozenset[str] = dataclasses.field(repr=False, default=frozenset())

    @property
    def float32_lanes(self) -> int:
        return self.vector_bits // 32

    def has(self, name: str) -> bool:
        """``has("AVX2")`` or ``has("avx2")``: by extension name or raw cpuinfo flag."""
        return name in self.extensions or name.lower() in self.flags

    def __str__(self) -> str:
        return (
            f"{self.arch}: {', '.join(self.extensions) or 'no SIMD extensions known'}; "
            f"widest vector {self.vector_bits} bits = {self.float32_lanes} float32 lanes"
        )


@dataclasses.dataclass(frozen=True)
class CacheLevel:
    """One cache as sysfs describes it (``index*/level,type,size,...``)."""

    level: int
    kind: str  # "Data", "Instruction", "Unified"
    size_bytes: int
    ways: int
    line_bytes: int
    shared_by: int  # how many logical CPUs share it

    @property
    def name(self) -> str:
        suffix = {"Data": "d", "Instruction": "i"}.get(self.kind, "")
        return f"L{self.level}{suffix}"

    @property
    def sets(self) -> int:
        return self.size_bytes // max(1, self.ways * self.line_bytes)

    def __str__(self) -> str:
        return (
            f"{self.name:<4} {_human(self.size_bytes):>7}  {self.ways:>2}-way  "
            f"{self.line_bytes} B lines  {self.sets:>5} sets  shared by {self.shared_by} cpu(s)"
        )


@dataclasses.dataclass(frozen=True)
class Machine:
    """Features, cores and caches together: what ``show_machine()`` prints."""

    simd: SimdFeatures
    cores: int
    caches: tuple[CacheLevel, ...]

    def cache(self, name: str) -> CacheLevel | None:
        """``cache("L1d")``, ``cache("L2")``..."""
        return next((c for c in self.caches if c.name == name), None)

    def __str__(self) -> str:
        lines = [str(self.simd), f"cores usable by this process: {self.cores}"]
        lines += [f"  {c}" for c in self.caches] or ["  (no cache information in sysfs)"]
        return "\n".join(lines)


def parse_cpuinfo(text: str) -> tuple[str, frozenset[str]]:
    """The first processor's feature flags: (``"x86_64"`` | ``"aarch64"``, flags)."""
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key = key.strip().lower()
        if key == "flags":
            return "x86_64", frozenset(value.split())
        if key == "features":
            return "aarch64", frozenset(value.split())
    return platform.machine(), frozenset()


def features_from_flags(arch: str, flags: frozenset[str], sve_bits: int | None = None) -> SimdFeatures:
    """Apply the extension table to a flag set."""
    table = ARM_EXTENSIONS if arch.startswith(("aarch64", "arm")) else X86_EXTENSIONS
    present = [(name, bits) for flag, name, bits in table if flag in flags]
    bits = max((b for _, b in present), default=64)
    if sve_bits and "sve" in flags:
        bits = max(bits, sve_bits)
    return SimdFeatures(arch, tuple(n for n, _ in present), bits, flags)


def parse_auxv(data: bytes) -> dict[int, int]:
    """The ELF auxiliary vector as {type: value} (64-bit little-endian pairs)."""
    out = {}
    for i in range(0, len(data) - 15, 16):
        key, value = struct.unpack_from("<QQ", data, i)
        if key == 0:
            break
        out[key] = value
    return out


def arm_hwcap_flags(auxv: dict[int, int]) -> frozenset[str]:
    """Decode AArch64 ``AT_HWCAP``/``AT_HWCAP2`` bits into cpuinfo-style flag names."""
    return frozenset(name for name, (kind, bit) in ARM_HWCAP_BITS.items() if auxv.get(kind, 0) >> bit & 1)


def simd_features(cpuinfo_path: str = "/proc/cpuinfo") -> SimdFeatures:
    """This CPU's SIMD extensions and vector width, from /proc/cpuinfo (and Arm hwcaps)."""
    try:
        arch, flags = parse_cpuinfo(pathlib.Path(cpuinfo_path).read_text())
    except OSError:
        arch, flags = platform.machine(), frozenset()
    sve_bits = None
    if arch == "aarch64":
        try:
            flags = flags | arm_hwcap_flags(parse_auxv(pathlib.Path("/proc/self/auxv").read_bytes()))
        except OSError:
            pass
        try:  # the kernel exposes the default SVE vector length in bytes
            sve_bits = 8 * int(pathlib.Path("/proc/sys/abi/sve_default_vector_length").read_text())
        except (OSError, ValueError):
            pass
    return features_from_flags(arch, flags, sve_bits)


def parse_size(text: str) -> int:
    """sysfs cache sizes: ``"32K"`` -> 32768, ``"1M"``, ``"512"``."""
    text = text.strip().upper()
    scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:], 1)
    return int(text.rstrip("KMG")) * scale


def _count_cpus(cpu_list: str) -> int:
    total = 0
    for part in cpu_list.strip().split(","):
        if "-" in part:
            lo, hi = part.split("-")
            total += int(hi) - int(lo) + 1
        elif part:
            total += 1
    return total


def read_caches(root: str = "/sys/devices/system/cpu/cpu0/cache") -> tuple[CacheLevel, ...]:
    """Every cache of cpu0, from sysfs; empty when sysfs has none (containers, macOS)."""
    caches = []
    for index in sorted(pathlib.Path(root).glob("index*")):

        def read(name: str, default: str = "0", index=index) -> str:
            try:
                return (index / name).read_text().strip()
            except OSError:
                return default

        caches.append(
            CacheLevel(
                int(read("level")),
                read("type", "Unified"),
                parse_size(read("size")),
                int(read("ways_of_associativity")),
                int(read("coherency_line_size", "64")),
                _count_cpus(read("shared_cpu_list", "0")),
            )
        )
    return tuple(caches)


def usable_cores() -> int:
    """Logical CPUs this process may run on (the affinity mask, not the host's count)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - macOS
        return os.cpu_count() or 1


def this_machine() -> Machine:
    """Features, cores and caches of this machine."""
    return Machine(simd_features(), usable_cores(), read_caches())


def _human(n: int) -> str:
    for unit, scale in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale and n % scale == 0:
            return f"{n // scale} {unit}"
    return f"{n} B"
