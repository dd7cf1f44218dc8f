"""A trace space: MetaSchedule design spaces as an adatune ``CandidateSpace``.

Design spaces come from a space generator inside a ``TuneContext``, which also gives the target's postprocessors and
mutators. Every candidate is a design space replayed with concrete decisions and postprocessed (on CUDA this
includes TVM's GPU verification), so a program that could not be built or launched never reaches the builder.
Mutations apply the context's mutators plus a uniform re-draw of one ``sample_categorical`` decision, which TVM's
mutators cover only when it feeds an unroll or a thread binding. Features are TVM's ``PerStoreFeature`` rows pooled
by ``StoreFeatures``, plus the design space.

On a CPU the space also holds the shape-generic program (``adatune.codegen.generic_schedule``) as design space
``GENERIC_SPACE`` of no decisions, given first by random candidates: a short search never ends below it.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Collection, Sequence
from typing import Any

import numpy as np
import tvm
from tvm.s_tir import meta_schedule as ms
from tvm.s_tir.meta_schedule.arg_info import ArgInfo

from ..codegen.generic_schedule import schedule_generic
from ..codegen.tensor_intrinsics import import_tensor_intrinsics
from ..space._candidate import CandidateSpace
from ..target import cpu_info
from ._candidate import GENERIC_SPACE, Decision, TraceCandidate, plain_decision, trace_to_json
from ._features import StoreFeatures

__all__ = ["TraceSpace"]

logger = logging.getLogger("adatune.trace")

_MUTATOR_APPLY = tvm.get_global_func("s_tir.meta_schedule.MutatorApply")  # Mutator.apply with a seed
_CATEGORICAL = "categorical"  # the mutation step that re-draws one sample_categorical decision
_MAX_FEATURE_CACHE = 200_000


def _tile_choices(extent: int, n: int, max_innermost: int) -> int:
    """Ordered factorisations of ``extent`` into ``n`` factors whose innermost is at most ``max_innermost``."""

    def ordered(x: int, k: int) -> int:  # ways to write x as a product of k ordered factors
        if k == 1:
            return 1
        count, p, rest = 1, 2, x
        while p * p <= rest:
            a = 0
            while rest % p == 0:
                rest //= p
                a += 1
            count *= math.comb(a + k - 1, k - 1)
            p += 1
        return count * (k if rest > 1 else 1)

    limit = max_innermost if max_innermost > 0 else extent
    return sum(ordered(extent // d, n - 1) for d in range(1, min(extent, limit) + 1) if extent % d == 0)


def _schedule_kinds(trace: tvm.s_tir.Trace) -> list[str]:
    """The instruction kinds of a trace's schedule part, simplified (what a design space and its instances share)."""
    return [i.kind.name for i in trace.simplified(remove_postproc=True).insts]


class TraceSpace(CandidateSpace):
    """Candidates of the design spaces that ``space_generator`` makes for ``mod`` on ``target``.
    ``categorical_mutation``: the categorical re-draw's weight beside the mutators'; ``max_tries``: replays spent per
    mutation; ``generic``: the shape-generic program as one more candidate on a CPU."""

    kind = "trace"

    def __init__(
        self,
        mod: tvm.IRModule,
        target: tvm.target.Target,
        space_generator: ms.SpaceGenerator,
        categorical_mutation: float = 0.1,
        max_tries: int = 8,
        generic: bool = True,
    ):
        if target.kind.name == "cuda":
            missing = [
                a for a in ("max_threads_per_block", "max_shared_memory_per_block") if target.attrs.get(a) is None
            ]
            if missing:
                raise ValueError(
                    f"MetaSchedule's CUDA rules and GPU verification need the target's {missing}; "
                    "use a target that states them, e.g. tvm.target.Target('nvidia/nvidia-a100', "
                    "host=adatune.target.host())"
                )
        import_tensor_intrinsics()  # what TuneContext imports first, in seconds instead of half a minute
        context = ms.TuneContext(
            mod=mod, target=target, space_generator=space_generator, task_name="main", rand_state=0, num_threads=1
        )
        traces = [s.trace for s in context.generate_design_space()]
        self._attach(context, traces, categorical_mutation, max_tries, generic)

    @classmethod
    def of_context(cls, context: ms.TuneContext, traces: Sequence[tvm.s_tir.Trace], max_tries: int = 8) -> TraceSpace:
        """The space of design spaces ``traces`` that meta_schedule already made in ``context`` (its plug-ins),
        without the generic program: meta_schedule's database stores a trace, and its trace is empty."""
        space = cls.__new__(cls)
        space._attach(context, list(traces), 0.1, max_tries, generic=False)
        return space

    def _attach(
        self,
        context: ms.TuneContext,
        traces: list[tvm.s_tir.Trace],
        categorical_mutation: float,
        max_tries: int,
        generic: bool,
    ) -> None:
        if categorical_mutation < 0 or max_tries < 1:
            raise ValueError(
                f"need categorical_mutation >= 0 and max_tries >= 1 (got {categorical_mutation}, {max_tries})"
            )
        if not traces:
            raise ValueError("the space generator made no design space for this module")
        self.context, self.mod, self.target = context, context.mod, context.target
        generator = context.space_generator
        self.postprocs: list[ms.Postproc] = list(generator.postprocs or [])
        if self.target.kind.name == "cuda" and not any(
            isinstance(p, ms.postproc.VerifyGPUCode) for p in self.postprocs
        ):
            verify = ms.postproc.VerifyGPUCode()
            verify._initialize_with_tune_context(context)
            self.postprocs.append(verify)
        self.mutators = [(m, float(p)) for m, p in (generator.mutator_probs or {}).items() if float(p) > 0]
        self.design_spaces: list[tvm.s_tir.Trace] = traces
        self._samples = [[inst for inst in tr.insts if inst in tr.decisions] for tr in self.design_spaces]
        self._insts_json = [json.dumps(trace_to_json(tr.as_json(remove_postproc=True))[0]) for tr in self.design_spaces]
        self._kinds = [_schedule_kinds(tr) for tr in self.design_spaces]  # compared simplified, as stored traces are
        self._has_categorical = [any(i.kind.name == "SampleCategorical" for i in s) for s in self._samples]
        self.categorical_mutation = float(categorical_mutation)
        self.max_tries = int(max_tries)
        self._extractor = StoreFeatures()
        self._args_info = ArgInfo.from_prim_func(self.mod["main"])
        self._features: dict[str, np.ndarray] = {}
        self.rejected = 0  # replays the postprocessors (or the replay itself) turned down
        self.generic = self._generic_program() if generic else None
        self._size = self._count() + (self.generic is not None)

    def _generic_program(self) -> TraceCandidate | None:
        """The shape-generic program as a candidate of no decisions, on a CPU where the schedule applies."""
        if self.target.kind.name != "llvm":
            return None
        try:
            func, changed = schedule_generic(self.mod["main"], cpu_info(self.target).lanes("float32"))
        except Exception as err:  # noqa: BLE001 - a function the schedule cannot handle: the rules' spaces only
            logger.warning("no generic program for this trace space: %s: %s", type(err).__name__, err)
            return None
        if not changed:
            return None
        return TraceCandidate(GENERIC_SPACE, [], tvm.s_tir.Schedule(tvm.IRModule({"main": func})))

    # -- replaying --------------------------------------------------------------------------------
    def _schedule(self, seed: int) -> tvm.s_tir.Schedule:
        return tvm.s_tir.Schedule(self.mod, seed=int(seed))

    def _finish(self, space: int, sch: tvm.s_tir.Schedule, custom: bool = False) -> TraceCandidate:
        """Post-process a replayed schedule; ``ValueError`` naming the postprocessor that rejects it."""
        sch.enter_postproc()
        for post in self.postprocs:
            try:
                ok = post.apply(sch)
            except Exception as err:  # noqa: BLE001 - a failing postprocessor is a rejection
                ok, why = False, f": {type(err).__name__}: {str(err).splitlines()[0][:200]}"
            else:
                why = ""
            if not ok:
                self.rejected += 1
                raise ValueError(f"postprocessor {type(post).__name__} rejects the program{why}")
        return TraceCandidate(space, self._decisions_of(sch.trace), sch, custom)

    @staticmethod
    def _decisions_of(trace: tvm.s_tir.Trace) -> list[Decision]:
        out: list[Decision] = []
        for inst in trace.insts:
            if inst.kind.name == "EnterPostproc":
                break
            if inst in trace.decisions:
                out.append(plain_decision(trace.decisions[inst]))
        return out

    def _replay(self, space: int, trace: tvm.s_tir.Trace, seed: int, custom: bool = False) -> TraceCandidate:
        sch = self._schedule(seed)
        try:
            trace.apply_to_schedule(sch, remove_postproc=True)
        except Exception as err:  # noqa: BLE001 - TVM raises several error kinds for a bad decision
            self.rejected += 1
            raise ValueError(
                f"the trace does not replay: {type(err).__name__}: {str(err).strip().splitlines()[0][:300]}"
            ) from None
        return self._finish(space, sch, custom)

    def sample(self, space: int, seed: int) -> TraceCandidate:
        """Design space ``space`` with every decision drawn afresh by TVM's sampler (seeded)."""
        return self._replay(space, tvm.s_tir.Trace(self.design_spaces[space].insts, {}), seed)

    def with_decisions(self, space: int, decisions: Sequence[Decision]) -> TraceCandidate:
        """Design space ``space`` replayed with exactly ``decisions``; ``ValueError`` if they do not replay."""
        samples = self._samples[space]
        if len(decisions) != len(samples):
            raise ValueError(f"design space {space} samples {len(samples)} decisions, got {len(decisions)}")
        trace = tvm.s_tir.Trace(self.design_spaces[space].insts, dict(zip(samples, decisions)))
        return self._replay(space, trace, 1)

    # -- CandidateSpace ---------------------------------------------------------------------------
    @property
    def size(self) -> int:
        return self._size

    def _count(self) -> int:
        """An upper bound on distinct programs: the product of each sampling instruction's choices."""
        n_loops = str(self.mod["main"]).count("for ") + 2  # compute locations: any loop, root or inlined
        total = 0
        for tr, samples in zip(self.design_spaces, self._samples):
            count = 1
            for inst in samples:
                name, attrs = inst.kind.name, inst.attrs
                if name == "SampleCategorical":
                    count *= len(attrs[0])
                elif name in ("SamplePerfectTile", "SamplePartitionedTile"):
                    dec = plain_decision(tr.decisions[inst])
                    extent = math.prod(dec) if isinstance(dec, list) else int(dec)
                    limit = int(attrs[1]) if name == "SamplePerfectTile" else 0
                    count *= _tile_choices(extent, len(dec) if isinstance(dec, list) else 1, limit)
                else:
                    count *= n_loops
            total += count
        return int(min(total, 2**62))

    def random_candidates(self, rng: np.random.Generator, n: int, exclude: Collection[str] = ()) -> list[Any]:
        """Random programs of the design spaces, the generic program first while not in ``exclude``."""
        out: list[TraceCandidate] = []
        seen = set(exclude)
        if self.generic is not None and self.generic.key not in seen and n > 0:
            seen.add(self.generic.key)
            out.append(self.generic)
        for _ in range(8 * n + 32):
            if len(out) >= n:
                break
            space = int(rng.integers(len(self.design_spaces)))
            try:
                cand = self.sample(space, int(rng.integers(1, 2**31 - 1)))
            except ValueError:
                continue
            if cand.key not in seen:
                seen.add(cand.key)
                out.append(cand)
        return out

    def mutate(self, candidates: Sequence[Any], rng: np.random.Generator) -> list[Any]:
        return [self.mutate_one(c, rng) or c for c in candidates]

    def mutate_one(self, cand: TraceCandidate, rng: np.random.Generator) -> TraceCandidate | None:
        """A different valid program one mutation away from ``cand``, or None after ``max_tries`` replays (at once
        for the generic program: it has no decision to mutate)."""
        if cand.space == GENERIC_SPACE:
            return None
        steps: list[Any] = [m for m, _ in self.mutators]
        weights = [p for _, p in self.mutators]
        if self._has_categorical[cand.space] and self.categorical_mutation > 0:
            steps.append(_CATEGORICAL)
            weights.append(self.categorical_mutation)
        if not steps:
            return None
        probs = np.asarray(weights, dtype=np.float64) / float(np.sum(weights))
        for _ in range(self.max_tries):
            step = steps[int(rng.choice(len(steps), p=probs))]
            seed = int(rng.integers(1, 2**31 - 1))
            if step == _CATEGORICAL:
                new = self._redraw_categorical(cand.trace, rng)
                custom = cand.custom
            else:
                new = _MUTATOR_APPLY(step, cand.trace, seed)
                custom = cand.custom or type(step).__name__ == "MutateParallel"
            if new is None:
                continue
            if custom:  # instructions (not only decisions) may now differ from the design space
                custom = json.dumps(trace_to_json(new.as_json(remove_postproc=True))[0]) != self._insts_json[cand.space]
            try:
                got = self._replay(cand.space, new, seed, custom)
            except ValueError:
                continue
            if got.key != cand.key:
                return got
        return None

    @staticmethod
    def _redraw_categorical(trace: tvm.s_tir.Trace, rng: np.random.Generator) -> tvm.s_tir.Trace | None:
        insts = [i for i in trace.insts if i.kind.name == "SampleCategorical" and i in trace.decisions]
        if not insts:
            return None
        inst = insts[int(rng.integers(len(insts)))]
        n = len(inst.attrs[0])
        if n < 2:
            return None
        old = int(trace.decisions[inst])
        new = int(rng.integers(n - 1))
        return trace.with_decision(inst, new + (new >= old), remove_postproc=True)

    def measure_candidate(self, cand: TraceCandidate) -> ms.MeasureCandidate:
        """``cand`` as meta_schedule sees it (its feature extractors and cost models take these)."""
        return ms.MeasureCandidate(cand.schedule, self._args_info)

    def featurize(self, candidates: Sequence[Any]) -> np.ndarray:
        """Per candidate: pooled per-store features (``StoreFeatures``), one-hot design space (the generic one last)."""
        todo = {c.key: c for c in candidates if c.key not in self._features}
        if todo:
            if len(self._features) > _MAX_FEATURE_CACHE:
                self._features.clear()
            cands = list(todo.values())
            rows = self._extractor(self.context, [self.measure_candidate(c) for c in cands])
            for c, row in zip(cands, rows):
                onehot = np.zeros(len(self.design_spaces) + 1)
                onehot[c.space if c.space != GENERIC_SPACE else -1] = 1.0
                self._features[c.key] = np.concatenate([row, onehot]).astype(np.float32)
        if not candidates:
            return np.zeros((0, self._extractor.width + len(self.design_spaces) + 1), dtype=np.float32)
        return np.stack([self._features[c.key] for c in candidates])

    def candidate_from_trace(self, trace: tvm.s_tir.Trace) -> TraceCandidate:
        """A measured trace (e.g. a meta_schedule database record, stored simplified) as a candidate of the design
        space it is an instance of, compared simplified; ``ValueError`` if it is an instance of none or won't replay."""
        kinds = _schedule_kinds(trace)
        for space, design in enumerate(self._kinds):
            if design == kinds:
                return self._replay(space, trace, 1, custom=True)
        raise ValueError("the trace is not an instance of any design space of this space")

    def decode(self, data: dict[str, Any]) -> TraceCandidate:
        """A record's trace candidate, replayed and post-processed; ``ValueError`` if it does not replay."""
        if not isinstance(data, dict) or data.get("kind") != "trace":
            raise ValueError(f"not a trace candidate: {data!r:.200}")
        space, decisions = data.get("space"), data.get("decisions")
        if space == GENERIC_SPACE:
            if self.generic is None:
                raise ValueError("this space has no generic program (not a CPU target, or the schedule does not apply)")
            if decisions != []:
                raise ValueError(f"the generic program takes no decisions, got {decisions!r:.200}")
            return self.generic
        if not isinstance(space, int) or not 0 <= space < len(self.design_spaces):
            raise ValueError(f"design space index {space!r} is not one of 0..{len(self.design_spaces) - 1}")
        if not isinstance(decisions, list):
            raise ValueError(f"a trace candidate needs a list of decisions, got {decisions!r:.200}")  # noqa: TRY004
        if "trace" in data:
            cand = self._from_trace_json(space, data["trace"])
        else:
            cand = self.with_decisions(space, decisions)
        wanted = [plain_decision(d) for d in decisions]
        if cand.decisions != wanted:
            k = (
                next(i for i, (a, b) in enumerate(zip(cand.decisions, wanted)) if a != b)
                if len(cand.decisions) == len(wanted)
                else min(len(cand.decisions), len(wanted))
            )
            raise ValueError(
                f"decision {k} does not replay as recorded (recorded {wanted[k : k + 1]}, "
                f"replayed {cand.decisions[k : k + 1]})"
            )
        return cand

    def _from_trace_json(self, space: int, trace_json: Any) -> TraceCandidate:
        sch = self._schedule(1)
        try:
            tvm.s_tir.Trace.apply_json_to_schedule(trace_json, sch)
        except Exception as err:  # noqa: BLE001
            self.rejected += 1
            raise ValueError(
                f"the recorded trace does not replay: {type(err).__name__}: {str(err).strip().splitlines()[0][:300]}"
            ) from None
        if _schedule_kinds(sch.trace) != self._kinds[space]:  # a stored MetaSchedule trace is simplified
            raise ValueError(f"the recorded trace is not an instance of design space {space}")
        return self._finish(space, sch, custom=True)
