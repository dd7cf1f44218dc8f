"""One point of a trace space: a design space with every ``sample_*`` instruction decided, replayed and
post-processed. Its key is the scheduled module's structural hash, so decisions that give the same program count as
one candidate.
"""

from __future__ import annotations

import base64
import zlib
from typing import Any

import tvm
import tvm_ffi

__all__ = [
    "GENERIC_SPACE",
    "Decision",
    "TraceCandidate",
    "module_from_text",
    "module_key",
    "module_to_text",
    "plain_decision",
    "trace_to_json",
]

#: a JSON-able decision: an index (categorical, compute location) or a list of tile factors
Decision = int | list[int]

#: the design space index of the shape-generic program (``adatune.codegen.generic_schedule``), a space of no decisions
GENERIC_SPACE = -1


def plain_decision(value: Any) -> Decision:
    """A trace decision (an FFI integer or array of integers) as a plain int or list of ints."""
    if isinstance(value, (int, tvm.tirx.IntImm)):
        return int(value)
    try:
        return [int(v) for v in value]
    except TypeError:
        return int(value)


def trace_to_json(value: Any) -> Any:
    """TVM's trace JSON (FFI arrays, IntImm/FloatImm) as plain Python lists, numbers and strings."""
    if value is None or isinstance(value, (bool, int, float)):
        return value
    if isinstance(value, str):
        return str(value)
    if isinstance(value, (tvm.tirx.IntImm, tvm.tirx.FloatImm)):
        return value.value
    if hasattr(value, "items"):
        return {str(k): trace_to_json(v) for k, v in value.items()}
    try:
        return [trace_to_json(v) for v in value]
    except TypeError:
        raise TypeError(f"cannot write {type(value).__name__} into a trace's JSON") from None


def module_key(mod: tvm.IRModule) -> str:
    """Structural hash of a scheduled module, as the hex key of its candidate."""
    return f"{int(tvm_ffi.structural_hash(mod)) & 0xFFFFFFFFFFFFFFFF:016x}"


def module_to_text(mod: tvm.IRModule) -> str:
    """``mod`` as one ASCII string a log line can hold: base64 of zlib-compressed ``tvm.ir.save_json``
    (MetaSchedule's database stores a workload as base64 of the same JSON; compressed, it is several times smaller)."""
    return base64.b64encode(zlib.compress(tvm.ir.save_json(mod).encode(), 9)).decode("ascii")


def module_from_text(text: str) -> tvm.IRModule:
    """The IRModule ``module_to_text`` wrote (``ValueError`` when ``text`` is not one)."""
    try:
        mod = tvm.ir.load_json(zlib.decompress(base64.b64decode(text)).decode())
    except (ValueError, TypeError, UnicodeDecodeError, zlib.error) as err:
        raise ValueError(f"not a stored IRModule ({type(err).__name__}: {err})") from None
    if not isinstance(mod, tvm.IRModule):
        raise ValueError(f"not a stored IRModule (a {type(mod).__name__})")
    return mod


class TraceCandidate:
    """A replayed, post-processed schedule of design space ``space`` with ``decisions`` for its samples."""

    __slots__ = ("custom", "decisions", "key", "schedule", "space")

    def __init__(self, space: int, decisions: list[Decision], schedule: tvm.s_tir.Schedule, custom: bool = False):
        self.space = int(space)
        self.decisions = decisions
        self.schedule = schedule
        #: its instructions differ from the design space's (a mutated parallel extent), so its JSON keeps the trace
        self.custom = bool(custom)
        self.key = module_key(schedule.mod)

    @property
    def trace(self) -> tvm.s_tir.Trace:
        """The full trace, post-processing included (what TVM's mutators take)."""
        return self.schedule.trace

    @property
    def mod(self) -> tvm.IRModule:
        """The scheduled, post-processed module (what the builder compiles)."""
        return self.schedule.mod

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "kind": "trace",
            "space": self.space,
            "decisions": [list(d) if isinstance(d, list) else d for d in self.decisions],
        }
        if self.custom:
            data["trace"] = trace_to_json(self.trace.as_json(remove_postproc=True))
        return data

    def __eq__(self, other: object) -> bool:
        return isinstance(other, TraceCandidate) and other.key == self.key

    def __hash__(self) -> int:
        return hash(self.key)

    def __repr__(self) -> str:
        return f"TraceCandidate(space={self.space}, decisions={self.decisions}, key={self.key})"
