"""The benchmark's five CPU workloads, each as one unscheduled PrimFunc every arm tunes.

dense-1024, bmm-bert-nt and conv2d-resnet18-L6 (NCHW, 28x28, 128 -> 128, 3x3) are adatune's built-in workloads
(their knob templates' computations, so the knob tuners run on the very same program); the fused conv2d + bias +
ReLU (ResNet-18 L6, stride 1, pad 1) and the row softmax of BERT-base attention scores (12 heads x 128 queries, 128
keys) have no knob template and are written in TE here (no topi).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import cast

import tvm
from tvm import te

import adatune
import adatune.templates.workloads
import adatune.trace
from adatune.trace import TraceTask

__all__ = ["BenchWorkload", "WORKLOADS", "make"]

WORKLOADS = ("dense-1024", "bmm-bert-nt", "conv2d-resnet18-L6", "conv2d-bias-relu-L6", "softmax-bert")
_KNOB_WORKLOADS = ("dense-1024", "bmm-bert-nt", "conv2d-resnet18-L6")


@adatune.trace.workload("bench/conv2d-bias-relu")
def conv2d_bias_relu(n: int, ci: int, hw: int, co: int, k: int, stride: int, pad: int) -> tvm.tirx.PrimFunc:
    data = te.placeholder((n, ci, hw, hw), name="data")
    weight = te.placeholder((co, ci, k, k), name="weight")
    bias = te.placeholder((co,), name="bias")
    size = hw + 2 * pad
    padded = te.compute(
        (n, ci, size, size),
        lambda b, c, y, x: te.if_then_else(
            te.all(y >= pad, y < hw + pad, x >= pad, x < hw + pad), data[b, c, y - pad, x - pad], 0.0
        ),
        name="pad",
    )
    out_hw = (size - k) // stride + 1
    rc, ry, rx = te.reduce_axis((0, ci), "rc"), te.reduce_axis((0, k), "ry"), te.reduce_axis((0, k), "rx")
    conv = te.compute(
        (n, co, out_hw, out_hw),
        lambda b, c, y, x: te.sum(
            padded[b, rc, y * stride + ry, x * stride + rx] * weight[c, rc, ry, rx], axis=[rc, ry, rx]
        ),
        name="conv",
    )
    out = te.compute((n, co, out_hw, out_hw), lambda b, c, y, x: te.max(conv[b, c, y, x] + bias[c], 0.0), name="relu")
    return te.create_prim_func([data, weight, bias, out])


@adatune.trace.workload("bench/softmax")
def softmax(rows: int, cols: int) -> tvm.tirx.PrimFunc:
    a = te.placeholder((rows, cols), name="A")
    k = te.reduce_axis((0, cols), name="k")
    mx = te.compute((rows,), lambda i: te.max(a[i, k], axis=k), name="mx")
    e = te.compute((rows, cols), lambda i, j: te.exp(a[i, j] - mx[i]), name="e")
    k2 = te.reduce_axis((0, cols), name="k2")
    s = te.compute((rows,), lambda i: te.sum(e[i, k2], axis=k2), name="s")
    out = te.compute((rows, cols), lambda i, j: e[i, j] / s[i], name="out")
    return te.create_prim_func([a, out])


@dataclass
class BenchWorkload:
    """A workload's trace task (whose unscheduled module every arm tunes) and its knob task, if it has one."""

    name: str
    trace_task: TraceTask
    knob_task: adatune.task.Task | None

    @property
    def mod(self) -> tvm.IRModule:
        return self.trace_task.unscheduled_module()

    def task_in(self, rules: str) -> TraceTask:
        """The same program's trace task in rule set ``rules`` (``adatune.trace.RULE_SETS``)."""
        prefix = adatune.trace.RULE_SETS[rules].prefix
        short = self.trace_task.name.removeprefix(adatune.trace.RULES_PREFIX)
        return cast(TraceTask, adatune.task.create(prefix + short, self.trace_task.args, self.trace_task.target))


def make(name: str, target: tvm.target.Target) -> BenchWorkload:
    knob = None
    if name in _KNOB_WORKLOADS:
        knob = cast(adatune.task.Task, adatune.templates.workloads.get(name).create_task(target))
        trace = adatune.task.create(adatune.trace.RULES_PREFIX + knob.name, knob.args, target)
    elif name == "conv2d-bias-relu-L6":
        trace = adatune.task.create("trace/rules/bench/conv2d-bias-relu", (1, 128, 28, 128, 3, 1, 1), target)
    elif name == "softmax-bert":
        trace = adatune.task.create("trace/rules/bench/softmax", (12 * 128, 128), target)
    else:
        raise KeyError(f"unknown workload {name!r}: use one of {WORKLOADS}")
    return BenchWorkload(name, cast(TraceTask, trace), knob)
