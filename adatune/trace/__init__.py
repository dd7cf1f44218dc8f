"""Trace search: MetaSchedule's probabilistic schedule programs and rule-made design spaces as adatune tasks.

A trace task's candidates are the decisions of a schedule trace, replayed and post-processed by TVM, so the
tuners, records, ``apply_history_best`` and resume treat them as they treat knob configs::

    import adatune.trace

    @adatune.trace.probabilistic_template("matmul-sampled")
    def matmul(n):
        ...  # build tensors, sch = tvm.s_tir.Schedule(te.create_prim_func(...)), sch.sample_perfect_tile(...)
        return sch, [A, B, C]

    task = adatune.task.create("trace/matmul-sampled", (512,), adatune.target.host())
    rules = adatune.trace.TraceTask.from_module(my_prim_func, adatune.target.host())  # no template at all
    blocked = adatune.trace.TraceTask.from_module(my_prim_func, adatune.target.host(), rules="vector")
"""

from ._candidate import GENERIC_SPACE, TraceCandidate
from ._features import StoreFeatures, aggregate_store_features
from ._rules import RULE_SETS, RuleSet
from ._space import TraceSpace
from ._task import (
    PREFIX,
    RULES_PREFIX,
    VECTOR_RULES_PREFIX,
    TraceTask,
    create_trace_task,
    probabilistic_template,
    workload,
)

__all__ = [
    "GENERIC_SPACE",
    "PREFIX",
    "RULES_PREFIX",
    "RULE_SETS",
    "RuleSet",
    "StoreFeatures",
    "TraceCandidate",
    "TraceSpace",
    "TraceTask",
    "VECTOR_RULES_PREFIX",
    "aggregate_store_features",
    "create_trace_task",
    "probabilistic_template",
    "workload",
]
