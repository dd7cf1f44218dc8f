"""Task extraction: every PrimFunc of a fused model becomes a tuning task, with its weight and FLOPs.

A function whose main computation is a knob template's (NCHW conv2d, 2-D dense, batch matmul NN/NT) becomes a
``FusedKnobTask``: the template's schedule replayed on the fused function, its epilogue inlined into the register
tile's write-back. Otherwise it is a ``TraceTask``, so no function is left unscheduled. Records of both store the
fused function, so a log recreates its tasks without the model.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import tvm
from tvm import tirx
from tvm.s_tir.analysis import estimate_tir_flops
from tvm.sym import Analyzer

from .. import target as _target
from ..space import FallbackConfig
from ..task import ArgSpec, Task, TuningTask, register_task_kind, workload_key
from ..templates.conv2d_nchwc import BLOCK as BLOCK_NCHWC
from ..templates.conv2d_winograd import BLOCK as BLOCK_WINOGRAD
from ..templates.conv2d_winograd import STAGES as WINOGRAD_STAGES
from ..trace import TraceTask
from ..trace._candidate import module_from_text, module_key, module_to_text, trace_to_json
from ..trace._task import _arg_specs
from ._frontend import Model

__all__ = ["MODEL_PREFIX", "FusedKnobTask", "ModelTask", "extract_tasks", "model_tasks", "format_task_table"]

MODEL_PREFIX = "model/"
_DATA_PAR, _REDUCE = 0, 2


def _task_module(func: tirx.PrimFunc) -> tvm.IRModule:
    """A fused (private) function as a standalone, buildable module: its symbol is ``main``."""
    return tvm.IRModule({"main": func.with_attr("global_symbol", "main")})


def _top_blocks(sch: tvm.s_tir.Schedule) -> list[str]:
    return [str(sch.get(b).name_hint) for b in sch.get_child_blocks(sch.get_sblock("root"))]


@dataclass(frozen=True)
class _Match:
    template: str
    args: tuple
    block: str  # the main computation's block in the fused function
    template_block: str  # the same block in the template


class FusedKnobTask(TuningTask):
    """A fused function scheduled by a knob template: the template's trace for a config, replayed on the fused
    function (``template_block`` renamed to ``block``), then the epilogue blocks inlined into the write-back."""

    def __init__(self, match: _Match, target: _target.TargetLike, mod: tvm.IRModule, epilogue: Sequence[str]):
        self.match = match
        self.knob = Task(match.template, match.args, target)
        self.target = self.knob.target
        self.name = f"{MODEL_PREFIX}{match.template}/{module_key(mod)}"
        self.args = tuple(match.args)
        self.workload_key = workload_key(self.name, self.args)
        self._mod = mod
        self.epilogue = list(epilogue)
        self.arg_specs: list[ArgSpec] = _arg_specs(mod["main"])
        self.flop = float(estimate_tir_flops(mod)) or self.knob.flop

    @property
    def space(self) -> Any:
        return self.knob.space

    @property
    def template_name(self) -> str:
        return self.knob.name

    def scheduled_module(self, candidate: Any) -> tvm.IRModule:
        return self.schedule(candidate).mod

    def schedule(self, candidate: Any) -> tvm.s_tir.Schedule:
        tmpl_sch, _ = self.knob.instantiate(candidate)
        insts, decisions = trace_to_json(tmpl_sch.trace.as_json())
        for inst in insts:
            if inst[0] == "GetSBlock" and inst[2][0] == self.match.template_block:
                inst[2][0] = self.match.block
        sch = tvm.s_tir.Schedule(self._mod)
        tvm.s_tir.Trace.apply_json_to_schedule([insts, decisions], sch)
        for name in self.epilogue[:-1]:
            sch.compute_inline(sch.get_sblock(name))
        if self.epilogue:
            sch.reverse_compute_inline(sch.get_sblock(self.epilogue[-1]))
        return sch

    def unscheduled_module(self) -> tvm.IRModule:
        return self._mod

    def candidate_from_json(self, data: dict) -> Any:
        return self.knob.candidate_from_json(data)

    def workload_json(self) -> dict[str, Any]:
        """The fused function, the template's match on it and the epilogue: all ``_restore_fused`` needs."""
        m = self.match
        return {
            "imports": [__name__],
            "ir": module_to_text(self._mod),
            "match": [m.template, list(m.args), m.block, m.template_block],
            "epilogue": self.epilogue,
        }


_FUSED: dict[str, tuple[_Match, tvm.IRModule, list[str]]] = {}


def _create_fused(name: str, args: Sequence[Any], target: tvm.target.Target) -> TuningTask:
    if name not in _FUSED:
        raise KeyError(f"model task {name!r} is unknown in this process: extract the model's tasks first")
    match, mod, epilogue = _FUSED[name]
    if tuple(args) != match.args:
        raise ValueError(f"model task {name!r} takes arguments {match.args}, got {tuple(args)}")
    return FusedKnobTask(match, target, mod, epilogue)


def _restore_fused(name: str, args: Sequence[Any], target: tvm.target.Target, stored: dict) -> TuningTask:
    """A fused task from its record's stored form, in a process that never extracted the model."""
    if name not in _FUSED and "ir" in stored:
        template, match_args, block, template_block = stored["match"]
        match = _Match(template, tuple(match_args), block, template_block)
        _FUSED[name] = (match, module_from_text(stored["ir"]), list(stored["epilogue"]))
    return _create_fused(name, args, target)


register_task_kind(MODEL_PREFIX, _create_fused, _restore_fused)


# -- recognising a template's computation ----------------------------------------------------------------
def _evaluate(expr: Any, values: dict) -> int | None:
    """``expr`` with each block variable bound to a value, simplified to an integer (None if it is not one)."""
    ana = Analyzer()
    for var, value in values.items():
        ana.bind(var, tirx.const(value, str(var.ty.dtype)))
    out = ana.simplify(expr)
    return int(out) if isinstance(out, tirx.IntImm) else None


def _linear(expr: Any, variables: list, var: Any) -> int | None:
    """The integer coefficient of ``var`` in the index ``expr`` (None when it is not a constant)."""
    hi = _evaluate(expr, {v: int(v.same_as(var)) for v in variables})
    lo = _evaluate(expr, {v: 0 for v in variables})
    return None if hi is None or lo is None else hi - lo


def _const_term(expr: Any, variables: list) -> int | None:
    return _evaluate(expr, {v: 0 for v in variables})


def _is_var(expr: Any, var: Any) -> bool:
    return isinstance(expr, tirx.Var) and expr.same_as(var)


def _shape(buf: Any) -> tuple[int, ...] | None:
    if not all(isinstance(s, tirx.IntImm) for s in buf.shape):
        return None
    return tuple(int(s) for s in buf.shape)


class _Params:
    """``buffer in params``: the buffer is a parameter of the function (not one its root block allocates)."""

    def __init__(self, allocated: set[str]):
        self.allocated = allocated

    def __contains__(self, buf: object) -> bool:
        return str(getattr(buf, "name", "")) not in self.allocated


def _unpadded(sch: tvm.s_tir.Schedule, names: list[str], src: Any, spatial: tuple[int, int]) -> tuple[Any, int] | None:
    """The buffer a convolution's input ``src`` reads and its padding: ``src`` itself and 0, or the input of the
    ``pad_temp`` stage with its padding when equal on the ``spatial`` dims (None for any other producer)."""
    if "pad_temp" not in names:
        return src.source, 0
    pad_block = sch.get(sch.get_sblock("pad_temp"))
    if src.source.name != "pad_temp" or len(pad_block.reads) != 1:
        return None
    pvars = [iv.var for iv in pad_block.iter_vars]
    offs = [_const_term(r.min, pvars) for r in pad_block.reads[0].region]
    h, w = (offs[d] for d in spatial)
    if any(o != 0 for d, o in enumerate(offs) if d not in spatial) or h is None or h != w or h > 0:
        return None
    return pad_block.reads[0].source, -h


def _window_stride(idx: list, ivs: list, y: Any, x: Any, ry: Any, rx: Any) -> int | None:
    """The stride of a sliding-window read ``[.., y * s + ry, x * s + rx, ..]`` at dims 2 and 3 (dilation 1)."""
    strides = {_linear(idx[2], ivs, y), _linear(idx[3], ivs, x)}
    if len(strides) != 1 or {_linear(idx[2], ivs, ry), _linear(idx[3], ivs, rx)} != {1}:
        return None
    stride = strides.pop()
    return stride if stride is not None and stride >= 1 else None


def _match_conv(sch: tvm.s_tir.Schedule, names: list[str], params: _Params) -> _Match | None:
    if "conv2d_nchw" not in names or any(n != "pad_temp" for n in names[: names.index("conv2d_nchw")]):
        return None
    block = sch.get(sch.get_sblock("conv2d_nchw"))
    ivs = [iv.var for iv in block.iter_vars]
    if [int(iv.iter_type) for iv in block.iter_vars] != [_DATA_PAR] * 4 + [_REDUCE] * 3 or len(block.reads) != 2:
        return None
    n, f, y, x, rc, ry, rx = ivs
    src, weight = block.reads[0], block.reads[1]
    if weight.source not in params or any(not _is_var(r.min, v) for r, v in zip(weight.region, (f, rc, ry, rx))):
        return None
    unpadded = _unpadded(sch, names, src, (2, 3))
    if unpadded is None or unpadded[0] not in params:
        return None
    data_buf, pad = unpadded
    data, kern, out = _shape(data_buf), _shape(weight.source), _shape(block.writes[0].source)
    if data is None or kern is None or out is None or data[1] != kern[1] or str(data_buf.dtype) != "float32":
        return None
    idx = [r.min for r in src.region]
    stride = _window_stride(idx, ivs, y, x, ry, rx)
    if not (_is_var(idx[0], n) and _is_var(idx[1], rc)) or stride is None:
        return None
    N, CI, H, W = data
    CO, _, KH, KW = kern
    OH, OW = (H + 2 * pad - KH) // stride + 1, (W + 2 * pad - KW) // stride + 1
    if (N, CO, OH, OW) != out or _shape(src.source) != (N, CI, H + 2 * pad, W + 2 * pad):
        return None
    return _Match("conv2d_nchw.x86", (N, CI, H, W, CO, KH, KW, stride, pad, "float32"), "conv2d_nchw", "conv2d_nchw")


def _match_conv_nchwc(sch: tvm.s_tir.Schedule, names: list[str], params: _Params) -> _Match | None:
    """A blocked convolution as ``adatune.models._layout`` legalises it (``conv2d_NCHWc``, square stride and
    padding): ``out[n, fo, y, x, fi] += src[n, rco, y*s+ry, x*s+rx, rci] * kernel[fo, rco, ry, rx, rci, fi]``."""
    if BLOCK_NCHWC not in names or any(n != "pad_temp" for n in names[: names.index(BLOCK_NCHWC)]):
        return None
    block = sch.get(sch.get_sblock(BLOCK_NCHWC))
    ivs = [iv.var for iv in block.iter_vars]
    if [int(iv.iter_type) for iv in block.iter_vars] != [_DATA_PAR] * 5 + [_REDUCE] * 4 or len(block.reads) != 2:
        return None
    n, fo, y, x, fi, rco, ry, rx, rci = ivs
    src, weight = block.reads[0], block.reads[1]
    if weight.source not in params or any(
        not _is_var(r.min, v) for r, v in zip(weight.region, (fo, rco, ry, rx, rci, fi))
    ):
        return None
    unpadded = _unpadded(sch, names, src, (2, 3))
    if unpadded is None or unpadded[0] not in params:
        return None
    data_buf, pad = unpadded
    data, kern, out = _shape(data_buf), _shape(weight.source), _shape(block.writes[0].source)
    if data is None or kern is None or out is None or len(data) != 5 or str(data_buf.dtype) != "float32":
        return None
    idx = [r.min for r in src.region]
    stride = _window_stride(idx, ivs, y, x, ry, rx)
    if not (_is_var(idx[0], n) and _is_var(idx[1], rco) and _is_var(idx[4], rci)) or stride is None:
        return None
    N, CIb, H, W, ic_bn = data
    COb, CIb_k, KH, KW, ic_k, oc_bn = kern
    OH, OW = (H + 2 * pad - KH) // stride + 1, (W + 2 * pad - KW) // stride + 1
    if (CIb_k, ic_k) != (CIb, ic_bn) or (N, COb, OH, OW, oc_bn) != out:
        return None
    if _shape(src.source) != (N, CIb, H + 2 * pad, W + 2 * pad, ic_bn):
        return None
    args = (N, CIb * ic_bn, H, W, COb * oc_bn, KH, KW, stride, pad, ic_bn, oc_bn, "float32")
    return _Match(f"{BLOCK_NCHWC}.x86", args, BLOCK_NCHWC, BLOCK_NCHWC)


def _match_winograd(sch: tvm.s_tir.Schedule, names: list[str], params: _Params) -> _Match | None:
    """A Winograd convolution as ``adatune.models._winograd`` legalises it: the template's stages in order,
    reading the data and the transformed kernel from parameters; ``m`` and the padding follow from shapes."""
    if BLOCK_WINOGRAD not in names or tuple(names[: names.index(BLOCK_WINOGRAD)]) != WINOGRAD_STAGES:
        return None
    data_buf = sch.get(sch.get_sblock("data_pad")).reads[0].source
    weight = sch.get(sch.get_sblock("bgemm")).reads[1].source
    out_buf = sch.get(sch.get_sblock(BLOCK_WINOGRAD)).writes[0].source
    data, kern, out = _shape(data_buf), _shape(weight), _shape(out_buf)
    if data_buf not in params or weight not in params or data is None or kern is None or out is None:
        return None
    if str(data_buf.dtype) != "float32" or len(data) != 4 or len(kern) != 4 or len(out) != 4:
        return None
    N, CI, H, W = data
    alpha, _, CI_k, CO = kern
    pad = (out[2] + 2 - H) // 2
    if CI_k != CI or out != (N, CO, H + 2 * pad - 2, W + 2 * pad - 2):
        return None
    args = (N, CI, H, W, CO, pad, alpha - 2, "float32")
    return _Match(f"{BLOCK_WINOGRAD}.x86", args, BLOCK_WINOGRAD, BLOCK_WINOGRAD)


def _match_matmul(sch: tvm.s_tir.Schedule, names: list[str], params: _Params) -> _Match | None:
    if "matmul" not in names or names.index("matmul") != 0:
        return None
    block = sch.get(sch.get_sblock("matmul"))
    kinds = [int(iv.iter_type) for iv in block.iter_vars]
    ivs = [iv.var for iv in block.iter_vars]
    if len(block.reads) != 2 or any(r.source not in params for r in block.reads):
        return None
    a, b = block.reads
    if any(str(r.source.dtype) != "float32" for r in block.reads):
        return None
    ai, bi = [r.min for r in a.region], [r.min for r in b.region]
    sa, sb = _shape(a.source), _shape(b.source)
    if sa is None or sb is None:
        return None
    if kinds == [_DATA_PAR, _DATA_PAR, _REDUCE]:
        i, j, k = ivs
        if len(ai) == 2 and len(bi) == 2 and _is_var(ai[0], i) and _is_var(ai[1], k):
            if _is_var(bi[0], k) and _is_var(bi[1], j):
                return _Match("dense.x86", (sa[0], sa[1], sb[1], "float32"), "matmul", "C")
        return None
    if kinds == [_DATA_PAR, _DATA_PAR, _DATA_PAR, _REDUCE] and len(ai) == 3 and len(bi) == 3:
        z, i, j, k = ivs
        if not (_is_var(ai[0], z) and _is_var(ai[1], i) and _is_var(ai[2], k) and _is_var(bi[0], z)):
            return None
        if sa[0] != sb[0]:
            return None
        if _is_var(bi[1], k) and _is_var(bi[2], j):
            return _Match("batch_matmul.x86", (sa[0], sa[1], sb[2], sa[2], "NN", "float32"), "matmul", "C")
        if _is_var(bi[1], j) and _is_var(bi[2], k):
            return _Match("batch_matmul.x86", (sa[0], sa[1], sb[1], sa[2], "NT", "float32"), "matmul", "C")
    return None


_MATCHERS: list[Callable[[tvm.s_tir.Schedule, list[str], _Params], _Match | None]] = [
    _match_conv,
    _match_conv_nchwc,
    _match_winograd,
    _match_matmul,
]


# -- the task table ---------------------------------------------------------------------------------------
class ModelTask:
    """One distinct fused function of a model: its calls (``weight``), FLOPs and the task that tunes it. ``kind``: the
    template name, or ``"trace"``; ``note``: why a recognised function went to trace search. Every function also has
    its ``trace_task`` (created on first use), so a log tuned with templates off applies to a table with them."""

    def __init__(
        self,
        func_name: str,
        global_vars: list[str],
        weight: int,
        flop: float,
        mod: tvm.IRModule,
        target: tvm.target.Target,
        task: TuningTask | None,
        kind: str,
        note: str = "",
        constant_args: frozenset[int] = frozenset(),
    ):
        self.func_name, self.global_vars, self.weight, self.flop = func_name, global_vars, weight, flop
        self.mod, self.target, self._task, self.kind, self.note = mod, target, task, kind, note
        self.constant_args = constant_args
        self.shape = _shape_text(_arg_specs(mod["main"]))
        self._trace: TuningTask | None = task if kind == "trace" else None

    @property
    def created(self) -> bool:
        return self._task is not None

    @property
    def task(self) -> TuningTask:
        if self._task is None:
            self._task = self.trace_task
        return self._task

    @property
    def trace_task(self) -> TuningTask:
        """The function in the trace search's rule-made design spaces, whatever ``kind`` is."""
        if self._trace is None:
            self._trace = TraceTask.from_module(self.mod, self.target)
            self._trace.constant_args = self.constant_args
        return self._trace

    @property
    def task_name(self) -> str:
        """The task's record name (known without creating a trace task)."""
        return self._task.name if self._task is not None else self.trace_task_name

    @property
    def trace_task_name(self) -> str:
        """The record name of ``trace_task`` (known without creating it)."""
        return f"trace/rules/ir-{module_key(self.mod)}"

    @property
    def space_size(self) -> int | None:
        """Candidates in the task's space (None for a trace task not created yet)."""
        return int(self._task.space.size) if self._task is not None else None


def _call_counts(mod: tvm.IRModule) -> dict[str, int]:
    """How often ``main`` calls each PrimFunc (``R.call_tir`` sites)."""
    call_tir = tvm.ir.Op.get("relax.call_tir")
    counts: dict[str, int] = {}

    def visit(expr: Any) -> None:
        if isinstance(expr, tvm.relax.Call) and expr.op.same_as(call_tir):
            gv = expr.args[0]
            counts[gv.name_hint] = counts.get(gv.name_hint, 0) + 1

    tvm.relax.analysis.post_order_visit(mod["main"], visit)
    return counts


def _constant_args(mod: tvm.IRModule) -> dict[str, frozenset[int]]:
    """Per PrimFunc, the argument positions that are constants at every call of ``main`` (``TuningTask.constant_args``):
    a model's weights, and what a call computes from constants alone (a transposed weight), which a build folds."""
    call_tir = tvm.ir.Op.get("relax.call_tir")
    constant_vars: set[Any] = set()
    found: dict[str, frozenset[int]] = {}

    def is_constant(expr: Any) -> bool:
        return isinstance(expr, tvm.ir.expr.Constant) or expr in constant_vars

    for block in mod["main"].body.blocks:
        for binding in block.bindings:
            value = binding.value
            if not (isinstance(value, tvm.relax.Call) and value.op.same_as(call_tir)):
                continue
            args = list(value.args[1].fields)
            name = value.args[0].name_hint
            here = frozenset(k for k, a in enumerate(args) if is_constant(a))
            found[name] = found[name] & here if name in found else here
            if len(here) == len(args):
                constant_vars.add(binding.var)
    return found


def _shape_text(specs: list[ArgSpec]) -> str:
    fmt = lambda s: "x".join(str(d) for d in s.shape) or "scalar"
    ins = ", ".join(fmt(s) for s in specs if not s.is_output)
    outs = ", ".join(fmt(s) for s in specs if s.is_output)
    return f"{ins} -> {outs}"


def _make_task(mod: tvm.IRModule, target: tvm.target.Target) -> tuple[TuningTask | None, str, str]:
    sch = tvm.s_tir.Schedule(mod)
    names = _top_blocks(sch)
    allocated = {str(b.name) for b in sch.get(sch.get_sblock("root")).alloc_buffers}
    params = _Params(allocated)
    note = ""
    for matcher in _MATCHERS:
        match = matcher(sch, names, params)
        if match is None:
            continue
        epilogue = names[names.index(match.block) + 1 :]
        try:
            task = FusedKnobTask(match, target, mod, epilogue)
            if task.space.size == 0:
                note = f"{match.template} has no valid config for {match.args}; trace search"
                break
            task.scheduled_module(FallbackConfig())  # the template and the epilogue must both schedule
        except Exception as err:  # noqa: BLE001 - the template cannot take this function: trace search
            note = f"{match.template} could not schedule it ({type(err).__name__}); trace search"
            break
        _FUSED[task.name] = (match, mod, epilogue)
        return task, match.template, note
    return None, "trace", note


def _trace_or_template(mod: tvm.IRModule, target: tvm.target.Target) -> tuple[TuningTask | None, str, str]:
    """With templates off: trace search, unless TVM's rules cannot make the function a design space (they fail on
    the Winograd functions' tile extraction), where its template takes it, with the reason as the note."""
    try:
        trace = TraceTask.from_module(mod, target)
    except Exception as err:  # noqa: BLE001 - TVM's space generator raises several kinds
        task, kind, _ = _make_task(mod, target)
        if task is None:
            raise
        return task, kind, f"templates off, but trace search has no design space for it ({type(err).__name__})"
    return trace, "trace", "templates off"


def extract_tasks(model: Model, target: _target.TargetLike | None = None, templates: bool = True) -> list[ModelTask]:
    """One task per distinct PrimFunc of ``model`` (structurally equal functions share one task and add up their
    calls), heaviest first (weight x FLOPs). ``templates=False``: every function goes to trace search, the knob
    templates unused, except one TVM's rules make no design space of (the note says so); its trace task is made here."""
    tgt = _target.create(target) if target is not None else _target.host()
    counts = _call_counts(model.mod)
    constants = _constant_args(model.mod)
    groups: dict[str, tuple[str, tvm.IRModule, list[str]]] = {}
    for gv, func in model.mod.functions_items():
        if not isinstance(func, tirx.PrimFunc):
            continue
        mod = _task_module(func)
        key = module_key(mod)
        if key not in groups:
            groups[key] = (gv.name_hint, mod, [])
        groups[key][2].append(gv.name_hint)
    out = []
    for func_name, mod, gvs in groups.values():
        weight = sum(counts.get(g, 0) for g in gvs)
        if weight == 0:
            continue  # not called by main (dead code left by a pass)
        task, kind, note = _make_task(mod, tgt) if templates else _trace_or_template(mod, tgt)
        constant = frozenset.intersection(*(constants.get(g, frozenset()) for g in gvs))
        if task is not None:
            task.uses = {**getattr(task, "uses", {}), model.name: weight}
            task.constant_args = constant
        out.append(
            ModelTask(func_name, gvs, weight, float(estimate_tir_flops(mod)), mod, tgt, task, kind, note, constant)
        )
    out.sort(key=lambda t: (-t.weight * t.flop, t.func_name))
    return out


def model_tasks(model: Model, target: _target.TargetLike | None = None) -> list[dict[str, Any]]:
    """The task table: name, shape, weight, FLOPs, space kind and size, one dict per task."""
    return [
        {
            "name": t.func_name,
            "task": t.task_name,
            "shape": t.shape,
            "weight": t.weight,
            "flop": t.flop,
            "kind": t.kind,
            "space_size": t.space_size,
            "note": t.note,
        }
        for t in extract_tasks(model, target)
    ]


def format_task_table(rows: list[dict[str, Any]]) -> str:
    """The task table as aligned text, with the weighted GFLOP total."""
    head = f"{'#':>3} {'function':<40} {'kind':<18} {'weight':>6} {'MFLOP':>9} {'space':>9}  shape"
    lines = [head]
    for i, r in enumerate(rows):
        lines.append(
            f"{i:>3} {r['name'][:40]:<40} {r['kind']:<18} {r['weight']:>6} {r['flop'] / 1e6:>9.2f} "
            f"{r['space_size'] if r['space_size'] is not None else '-':>9}  {r['shape']}"
        )
    total = sum(r["weight"] * r["flop"] for r in rows)
    lines.append(f"{len(rows)} tasks, {sum(r['weight'] for r in rows)} calls, {total / 1e9:.3f} GFLOP weighted")
    return "\n".join(lines)
