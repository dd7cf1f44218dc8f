"""Targets as TVM 0.27 JSON dicts, with proper host-CPU detection and what a CPU target really offers.

TVM's wheel reports a conda triple and ``"mcpu": "native"`` silently falls back to generic x86 (no AVX-512), so
``host()`` asks LLVM for the real CPU and pins the triple. ``cpu_info`` reads the ISA from LLVM's features
(``llvm_get_vector_width`` answers 512 bits for every x86 CPU) and caches from the OS when the target is this host.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import platform
import re
import subprocess
import threading
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from typing import Any, TypeAlias, cast

import psutil
import tvm

__all__ = [
    "CpuInfo",
    "TargetLike",
    "cpu_info",
    "cpus_pinned_by_other_threads",
    "create",
    "cuda",
    "one_blas_thread",
    "current",
    "describe_host",
    "host",
    "same_target",
    "size_tvm_thread_pool",
    "to_json",
    "tvm_main_thread",
    "tvm_thread_env",
    "vector_lanes",
]

TargetLike: TypeAlias = tvm.target.Target | dict | str


def _host_triple() -> str:
    machine = platform.machine()
    if machine in ("x86_64", "AMD64"):
        return "x86_64-linux-gnu"
    if machine in ("aarch64", "arm64"):
        return "aarch64-linux-gnu"
    return tvm.target.codegen.llvm_get_system_triple()


def _usable_cores() -> int:
    """Physical cores this process may run on (a CPU affinity mask or container may allow fewer)."""
    physical = psutil.cpu_count(logical=False) or psutil.cpu_count() or 1
    allowed = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else physical
    return max(1, min(physical, allowed))


def tvm_thread_env() -> dict[str, str]:
    """The environment a process that runs adatune's kernels needs so TVM's pool has one thread per usable physical
    core; empty when the user chose a number (``TVM_NUM_THREADS`` or ``OMP_NUM_THREADS``). Without either, TVM 0.27
    runs ``hardware_concurrency() / 2`` threads on x86, assuming two-way SMT: on a CPU without SMT (cloud VMs, SMT
    switched off) every parallel kernel uses half the cores, while PyTorch uses all of them."""
    if "TVM_NUM_THREADS" in os.environ or "OMP_NUM_THREADS" in os.environ:
        return {}
    return {"TVM_NUM_THREADS": str(_usable_cores())}


def size_tvm_thread_pool() -> None:
    """Size the TVM thread pools this process starts from now on (``tvm_thread_env``). Called where adatune runs
    kernels (a measurement worker at its start, a compiled model it returns), never on import: the host application's
    environment is its own. TVM 0.27 reads the count once, when a thread's pool starts, and
    ``runtime.config_threadpool`` cannot raise it, so the environment before the pool starts is the only lever."""
    os.environ.update(tvm_thread_env())


def cpus_pinned_by_other_threads() -> set[int]:
    """The CPUs this process's other threads are each pinned to alone (TVM's pool workers; onnxruntime's,
    PyTorch's and OpenBLAS's threads are not pinned)."""
    me = threading.get_native_id()
    taken: set[int] = set()
    for task in os.listdir("/proc/self/task"):
        if int(task) == me:
            continue
        try:
            cpus = os.sched_getaffinity(int(task))
        except OSError:  # the thread ended
            continue
        if len(cpus) == 1:
            taken |= cpus
    return taken


@contextlib.contextmanager
def tvm_main_thread() -> Iterator[None]:
    """Run TVM kernels inside the block with the calling thread pinned off its pool workers' CPUs (affinity restored
    after). TVM 0.27 pins each pool worker to a CPU and runs the first share of every parallel loop on the calling
    thread; on a worker's CPU the two share a core and every parallel kernel slows. A no-op where nothing is pinned
    (TVM's pool not started yet, one thread, ``TVM_BIND_THREADS=0``)."""
    if not hasattr(os, "sched_setaffinity") or not os.path.isdir("/proc/self/task"):
        yield
        return
    before = os.sched_getaffinity(0)
    free = before - cpus_pinned_by_other_threads()
    if not free or free == before:
        yield
        return
    os.sched_setaffinity(0, free)
    try:
        yield
    finally:
        os.sched_setaffinity(0, before)


_BLAS: list[Any] = []  # one threadpoolctl controller, made on first use (inspecting the loaded libraries is slow)


def one_blas_thread() -> contextlib.AbstractContextManager[Any]:
    """numpy's BLAS on one thread inside the block: a multi-threaded OpenBLAS call leaves its workers spinning after
    it returns, and a TVM kernel timed right after shares the cores with them. Wrap every numpy computation in a
    process that times kernels (tiny products, such as the RFEI jackknife, are also faster on one thread)."""
    try:
        if not _BLAS:
            from threadpoolctl import ThreadpoolController

            _BLAS.append(ThreadpoolController())
        return cast(contextlib.AbstractContextManager[Any], _BLAS[0].limit(limits=1, user_api="blas"))
    except Exception:  # noqa: BLE001 - threadpoolctl confused by an unusual BLAS: run as is
        return contextlib.nullcontext()


def host(num_cores: int | None = None) -> tvm.target.Target:
    """LLVM target for this machine's CPU: real triple, LLVM's name for the CPU, physical core count."""
    triple = _host_triple()
    cpu = tvm.target.codegen.llvm_get_system_cpu()
    if not cpu or cpu == "generic" or not tvm.target.codegen.llvm_is_valid_cpu(cpu, triple):
        cpu = "x86-64-v3" if triple.startswith("x86_64") else "generic"
    cores = num_cores or _usable_cores()
    return tvm.target.Target({"kind": "llvm", "mtriple": triple, "mcpu": cpu, "num-cores": int(cores)})


def cuda(arch: str = "sm_80", host_target: TargetLike | None = None) -> tvm.target.Target:
    """CUDA target for compute capability ``arch`` (``"sm_80"``, ``"sm_90"``, ...) with an LLVM host."""
    if not (isinstance(arch, str) and arch.startswith("sm_") and arch[3:].rstrip("a").isdigit()):
        raise ValueError(f"CUDA arch must look like 'sm_80', got {arch!r}")
    h = create(host_target) if host_target is not None else host()
    return tvm.target.Target({"kind": "cuda", "arch": arch}, host=h)


def create(target: TargetLike) -> tvm.target.Target:
    """A TVM Target from a Target, a JSON dict, a JSON string or a kind name ("llvm" means the host)."""
    if isinstance(target, tvm.target.Target):
        return target
    if isinstance(target, str):
        text = target.strip()
        if text == "llvm":
            return host()
        if text == "cuda":
            return cuda()
        if text.startswith("{"):
            target = json.loads(text)
        else:
            raise ValueError(
                f"target {target!r}: TVM 0.27 takes JSON dicts such as "
                '{"kind": "llvm", "mcpu": "znver4"}; use adatune.target.host() for this CPU'
            )
    if not isinstance(target, dict) or "kind" not in target:
        raise ValueError(f"target must be a dict with a 'kind', got {target!r}")
    try:
        return tvm.target.Target(target)
    except Exception as err:
        raise ValueError(f"invalid target {target!r}: {err}") from err


def current() -> tvm.target.Target:
    """The target of the enclosing ``with target:`` block, else the host CPU."""
    t = tvm.target.Target.current(allow_none=True)
    return t if t is not None else host()


def to_json(target: tvm.target.Target) -> dict:
    """A JSON-able dict describing ``target`` (used in records)."""
    exported = dict(target.export())
    exported.pop("keys", None)
    exported.pop("tag", None)
    return json.loads(json.dumps(exported, default=_jsonable))


def _jsonable(value: Any) -> Any:
    """TVM maps (a CUDA target's ``host``) become dicts, arrays (``mattr``, ``keys``) lists, anything else str."""
    if hasattr(value, "items") and callable(value.items):
        return {str(k): v if isinstance(v, (str, int, float, bool)) else _jsonable(v) for k, v in value.items()}
    if hasattr(value, "__len__") and hasattr(value, "__getitem__") and not isinstance(value, (str, bytes)):
        return [_jsonable(v) if not isinstance(v, (str, int, float, bool)) else v for v in value]
    return str(value)


_MATCH_KEYS = ("kind", "mtriple", "mcpu", "arch")


def same_target(a: Any, b: Any) -> bool:
    """Records apply only to the same kind of device: same kind, triple, CPU or CUDA arch. A plain LLVM target
    naming no CPU (``tvm.target.Target("llvm")``, as AutoTVM scripts open) is this host, as ``create("llvm")``."""

    def match_form(t: Any) -> dict:
        d = to_json(create(t)) if not isinstance(t, dict) else t
        return to_json(host()) if d.get("kind") == "llvm" and not d.get("mcpu") else d

    da, db = match_form(a), match_form(b)
    return all(da.get(k) == db.get(k) for k in _MATCH_KEYS)


def vector_lanes(target: tvm.target.Target, dtype: str = "float32") -> int:
    """SIMD lanes for ``dtype`` on an LLVM target (16 fp32 lanes with AVX-512, 8 with AVX2)."""
    if target.kind.name != "llvm":
        return 1
    return cpu_info(target).lanes(dtype)


@dataclass(frozen=True)
class CpuInfo:
    """What a CPU target offers a kernel: its ISA level, vector registers, caches (bytes: L1d and L2 per core, L3 per
    package) and cores. Caches come from the OS for this machine (``from_host``), else typical sizes for the ISA."""

    model: str
    mcpu: str
    triple: str
    isa: str
    vector_bits: int
    vector_registers: int
    l1d_bytes: int
    l2_bytes: int
    l3_bytes: int
    cores: int
    from_host: bool

    def lanes(self, dtype: str = "float32") -> int:
        """Elements of ``dtype`` in one vector register."""
        return max(1, self.vector_bits // int(tvm.DataType(dtype).bits))

    @property
    def fp32_lanes(self) -> int:
        return self.lanes("float32")


# ISA -> (vector bits, vector registers), most capable first; the first whose LLVM feature the CPU has wins
_X86_ISAS = (
    ("avx512", "avx512f", 512, 32),
    ("avx2", "avx2", 256, 16),
    ("avx", "avx", 256, 16),
    ("sse4", "sse4.1", 128, 16),
    ("sse2", "sse2", 128, 16),
)
_ARM_ISAS = (("sve", "sve", 128, 32), ("neon", "neon", 128, 32))  # SVE length is unknown at compile time: 128
# typical per-core L1d, L2 and shared L3 of CPUs with each ISA, for targets that are not this machine
_TYPICAL_CACHES = {
    "avx512": (32 << 10, 1 << 20, 32 << 20),
    "avx2": (32 << 10, 512 << 10, 16 << 20),
    "sve": (64 << 10, 1 << 20, 32 << 20),
    "neon": (64 << 10, 1 << 20, 32 << 20),
}
_SMALL_CACHES = (32 << 10, 256 << 10, 8 << 20)


def _isa(target: tvm.target.Target, triple: str) -> tuple[str, int, int]:
    features = set(tvm.target.codegen.llvm_get_cpu_features(target))
    table = _ARM_ISAS if triple.startswith(("aarch64", "arm64")) else _X86_ISAS
    for name, feature, bits, regs in table:
        if feature in features:
            return name, bits, regs
    return "scalar", 128, 16


def _is_host(triple: str, mcpu: str) -> bool:
    arch = triple.split("-", 1)[0]
    return arch == _host_triple().split("-", 1)[0] and bool(mcpu) and mcpu == tvm.target.codegen.llvm_get_system_cpu()


def _size_bytes(text: str) -> int:
    """``"32K"``, ``"512 KiB"``, ``"32 MiB"``, ``"1M"`` -> bytes."""
    m = re.fullmatch(r"\s*([\d.]+)\s*([KMG]?)(?:i?B)?\s*", text, re.IGNORECASE)
    if not m:
        raise ValueError(f"cannot read a cache size from {text!r}")
    return int(float(m.group(1)) * {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}[m.group(2).upper()])


@functools.lru_cache(maxsize=1)
def _host_caches() -> tuple[int, int, int] | None:
    """Per-core L1d and L2 and the L3 of CPU 0 from sysfs, else from ``lscpu -C``; None when neither says."""
    found: dict[int, int] = {}
    base = "/sys/devices/system/cpu/cpu0/cache"
    try:
        for entry in sorted(os.listdir(base)):
            d = os.path.join(base, entry)
            if not entry.startswith("index"):
                continue
            with open(os.path.join(d, "type")) as f:
                kind = f.read().strip()
            with open(os.path.join(d, "level")) as f:
                level = int(f.read())
            with open(os.path.join(d, "size")) as f:
                size = _size_bytes(f.read())
            if kind in ("Data", "Unified"):
                found[level] = size
    except (OSError, ValueError):
        found = {}
    if not {1, 2} <= set(found):
        try:
            out = subprocess.run(
                ["lscpu", "--caches=NAME,ONE-SIZE", "--bytes"], capture_output=True, text=True, timeout=10, check=True
            ).stdout
        except (OSError, subprocess.SubprocessError):
            return None
        names = {"L1d": 1, "L2": 2, "L3": 3}
        found = {
            names[p[0]]: int(p[1])
            for p in (line.split() for line in out.splitlines())
            if len(p) == 2 and p[0] in names and p[1].isdigit()
        }
    if not {1, 2} <= set(found):
        return None
    return found[1], found[2], found.get(3, 0)


@functools.lru_cache(maxsize=1)
def _host_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith(("model name", "Model name")):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def cpu_info(target: TargetLike | None = None) -> CpuInfo:
    """The ISA, vector registers, caches and cores of an LLVM CPU target (the host when None). The ISA comes from
    LLVM's features for ``mcpu`` and ``mattr``: a target without ``mcpu`` compiles generic x86-64 (SSE2) code."""
    tgt = host() if target is None else create(target)
    if tgt.kind.name != "llvm":
        raise ValueError(f"cpu_info needs an LLVM CPU target, got kind {tgt.kind.name!r}")
    return _cpu_info(json.dumps(to_json(tgt), sort_keys=True))


@functools.lru_cache(maxsize=64)
def _cpu_info(key: str) -> CpuInfo:
    tgt = tvm.target.Target(json.loads(key))
    triple = str(tgt.attrs.get("mtriple") or tvm.target.codegen.llvm_get_system_triple())
    mcpu = str(tgt.attrs.get("mcpu") or "")
    isa, bits, regs = _isa(tgt, triple)
    on_host = _is_host(triple, mcpu)
    caches = _host_caches() if on_host else None
    l1, l2, l3 = caches or _TYPICAL_CACHES.get(isa, _SMALL_CACHES)
    cores = tgt.attrs.get("num-cores")
    n_cores = int(cores) if cores else (psutil.cpu_count(logical=False) or psutil.cpu_count() or 1)
    model = _host_model() if on_host else (mcpu or "generic")
    return CpuInfo(model, mcpu or "generic", triple, isa, bits, regs, l1, l2, l3, n_cores, on_host)


def describe_host() -> dict[str, Any]:
    """This machine's CPU for benchmark records: model, mcpu, ISA, vector lanes, registers, caches, cores, versions."""
    info = asdict(cpu_info(host()))
    info["fp32_lanes"] = cpu_info(host()).fp32_lanes
    info["llvm_version"] = int(tvm.target.codegen.llvm_version_major())
    info["tvm_version"] = str(tvm.__version__)
    return info
