"""Targets as TVM 0.27 JSON dicts, with proper host-CPU detection.

TVM's wheel reports a conda triple by default and ``"mcpu": "native"`` silently falls back to generic x86,
which loses AVX-512 and 2-4x of speed; ``host()`` asks LLVM for the real CPU name and pins the triple.
"""
from __future__ import annotations

import json
import platform
from typing import Any, Union

import psutil
import tvm

__all__ = ["host", "cuda", "create", "current", "vector_lanes", "same_target", "to_json", "TargetLike"]

TargetLike = Union[tvm.target.Target, dict, str]


def _host_triple() -> str:
    machine = platform.machine()
    if machine in ("x86_64", "AMD64"):
        return "x86_64-linux-gnu"
    if machine in ("aarch64", "arm64"):
        return "aarch64-linux-gnu"
    return tvm.target.codegen.llvm_get_system_triple()


def host(num_cores: int | None = None) -> tvm.target.Target:
    """LLVM target for this machine's CPU: real triple, LLVM's name for the CPU, physical core count."""
    triple = _host_triple()
    cpu = tvm.target.codegen.llvm_get_system_cpu()
    if not cpu or cpu == "generic" or not tvm.target.codegen.llvm_is_valid_cpu(cpu, triple):
        cpu = "x86-64-v3" if triple.startswith("x86_64") else "generic"
    cores = num_cores or psutil.cpu_count(logical=False) or psutil.cpu_count() or 1
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
            raise ValueError(f"target {target!r}: TVM 0.27 takes JSON dicts such as "
                             '{"kind": "llvm", "mcpu": "znver4"}; use adatune.target.host() for this CPU')
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
    return json.loads(json.dumps(exported, default=str))


_MATCH_KEYS = ("kind", "mtriple", "mcpu", "arch")


def same_target(a: Any, b: Any) -> bool:
    """Records apply only to the same kind of device: same kind, triple, CPU or CUDA arch."""
    da = to_json(create(a)) if not isinstance(a, dict) else a
    db = to_json(create(b)) if not isinstance(b, dict) else b
    return all(da.get(k) == db.get(k) for k in _MATCH_KEYS)


def vector_lanes(target: tvm.target.Target, dtype: str = "float32") -> int:
    """SIMD lanes for ``dtype`` on an LLVM target (16 fp32 lanes with AVX-512)."""
    if target.kind.name != "llvm":
        return 1
    bits = int(tvm.DataType(dtype).bits)
    try:
        width = int(tvm.target.codegen.llvm_get_vector_width(target))
    except Exception:
        width = 128
    return max(1, width // bits)
