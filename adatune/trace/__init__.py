"""Trace search: MetaSchedule's probabilistic schedule programs and rule-made design spaces as adatune tasks.

A trace task's candidates are the decisions of a schedule trace, replayed and post-processed by TVM, so the tuners,
records, ``apply_history_best`` and resume treat them as they treat knob configs. A task comes from a
``@probabilistic_template("name")`` (then ``adatune.task.create("trace/name", args, target)``) or from any PrimFunc
through ``TraceTask.from_module(func, target, rules=...)``, no template at all.
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
