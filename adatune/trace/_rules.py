"""Which schedule rules make a rule-made trace space: TVM's own, or TVM's with a register-blocked output tile.

TVM's default CPU rules sample tiles from all divisors, so at a budget of a few dozen trials most candidates'
innermost output tile is not whole vectors and runs partly scalar. The ``vector`` rule set replaces TVM's
multi-level tiling by ``MultiLevelTilingWideVector``: the innermost output tile is whole SIMD vectors (the knob
templates' register block), a non-dividing axis gets a guarded tail. ``packed`` is ``vector`` plus
``_layout_rules`` before the tiling.
"""

from __future__ import annotations

from dataclasses import dataclass

import tvm
from tvm.s_tir import meta_schedule as ms

from .. import target as _target
from ._layout_rules import PackOperandPanels, VectorizeOutputChannels

__all__ = ["RULE_SETS", "RuleSet", "space_generator"]


@dataclass(frozen=True)
class RuleSet:
    """A named set of design-space rules (declared once: names, docs and task-name prefixes come from here)."""

    name: str
    prefix: str  # task names of this rule set start with it
    doc: str


#: vectors of the target's SIMD width in the innermost output tile: the knob templates' usual ``nr`` (two
#: vectors: one broadcast of A feeds two FMAs)
VECTORS_PER_ROW = 2


RULE_SETS: dict[str, RuleSet] = {
    "tvm": RuleSet("tvm", "trace/rules/", "TVM's default schedule rules, postprocessors and mutators for the target"),
    "vector": RuleSet(
        "vector",
        "trace/vector-rules/",
        f"TVM's rules with the output's innermost spatial tile held at {VECTORS_PER_ROW} whole SIMD vectors "
        "(LLVM targets only)",
    ),
    "packed": RuleSet(
        "packed",
        "trace/packed-rules/",
        "the vector rules, each GEMM-like block also offered with its vectorised operand packed per call into "
        "panels one register tile wide, or where the output's innermost extent takes no whole tiles, with its "
        "output channels innermost and its weight packed alike (LLVM targets only)",
    ),
}


def check_rules(rules: str) -> RuleSet:
    if rules not in RULE_SETS:
        docs = "; ".join(f"{r.name}: {r.doc}" for r in RULE_SETS.values())
        raise ValueError(f"unknown rule set {rules!r}; choose one of {', '.join(RULE_SETS)} ({docs})")
    return RULE_SETS[rules]


def _vector_rules(target: tvm.target.Target, pack: bool = False) -> list[ms.ScheduleRule]:
    if target.kind.name != "llvm":
        name = "packed" if pack else "vector"
        raise ValueError(f"the {name!r} rule set tiles for CPU SIMD registers; target {target.kind.name!r} has none")
    cpu = _target.cpu_info(target)
    bits = cpu.vector_bits * VECTORS_PER_ROW
    rules = list(ms.ScheduleRule.create("llvm"))
    tiling = [k for k, r in enumerate(rules) if type(r).__name__ == "MultiLevelTiling"]
    if len(tiling) != 1:  # TVM changed its defaults: say so rather than tune a space nobody meant
        raise RuntimeError(f"expected one MultiLevelTiling among TVM's default LLVM rules, found {len(tiling)}")
    if pack:  # before the tiling, so that it tiles the re-laid block
        rules[tiling[0] : tiling[0]] = [VectorizeOutputChannels(panel_bits=bits), PackOperandPanels(panel_bits=bits)]
        tiling[0] += 2
    rules[tiling[0]] = ms.schedule_rule.MultiLevelTilingWideVector(
        structure="SSRSRS",  # TVM's default CPU structure, kept
        vector_length_in_bits=bits,
        # an innermost factor beyond the accumulator rows the registers hold spills them in every FMA step
        max_innermost_factor=cpu.vector_registers // VECTORS_PER_ROW,
        reuse_read=None,
        reuse_write=ms.schedule_rule.ReuseType(req="may", levels=[1, 2], scope="global"),
    )
    return rules


def space_generator(rules: str, target: tvm.target.Target) -> ms.SpaceGenerator:
    """A post-order-apply space generator with rule set ``rules`` for ``target``."""
    check_rules(rules)
    if rules == "tvm":
        return ms.space_generator.PostOrderApply()
    return ms.space_generator.PostOrderApply(
        sch_rules=_vector_rules(target, pack=rules == "packed"), postprocs="from-target", mutator_probs="from-target"
    )
