"""A candidate kind defined only here (not a knob config) goes through every tuner, cost model, records, resume
and dispatch with no change to library code: the proof that the candidate protocol is the only contract. The
checks are adatune.testing's (``check_candidate_kind`` runs them all at once for a user's kind)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest
import tvm
from tvm import te

import adatune
from adatune.space import ConfigSpace, DiscreteSpace
from adatune.task import ArgSpec, TuningTask, register_task_kind
from adatune.testing import (
    check_candidate_space,
    check_cost_models_learn,
    check_records_dispatch_and_build,
    check_tunes_and_resumes,
)
from adatune.tuners import tuner_specs

FACTORS = [1, 2, 4, 8, 16, 32]


class Tile:
    """A tile shape plus a vectorize flag: the candidate kind "tile"."""

    def __init__(self, ti: int, tj: int, vec: int):
        self.ti, self.tj, self.vec = ti, tj, vec

    @property
    def key(self) -> str:
        return f"{self.ti}x{self.tj}v{self.vec}"

    def to_json(self) -> dict:
        return {"kind": "tile", "ti": self.ti, "tj": self.tj, "vec": self.vec}


class TileSpace(DiscreteSpace):
    kind = "tile"
    dims = [len(FACTORS), len(FACTORS), 2]  # type: ignore[assignment]

    @property
    def size(self) -> int:
        return math.prod(self.dims)

    def from_digits(self, digits: np.ndarray) -> list[Tile]:
        return [Tile(FACTORS[a], FACTORS[b], int(v)) for a, b, v in np.asarray(digits, dtype=np.int64)]

    def encode(self, cands: Sequence[Any]) -> np.ndarray:
        return np.asarray([[FACTORS.index(c.ti), FACTORS.index(c.tj), c.vec] for c in cands], dtype=np.int64)

    def valid_digits(self, digits: np.ndarray) -> np.ndarray:
        return np.ones(len(digits), dtype=bool)

    def random_candidates(self, rng: np.random.Generator, n: int, exclude: Any = ()) -> list[Tile]:
        every = [c for c in self.from_digits(np.indices(self.dims).reshape(3, -1).T) if c.key not in exclude]
        pick = rng.choice(len(every), size=min(n, len(every)), replace=False) if every else []
        return [every[i] for i in pick]

    def mutate(self, cands: Sequence[Any], rng: np.random.Generator) -> list[Tile]:
        d = self.encode(cands)
        k = rng.integers(3, size=len(d))
        d[np.arange(len(d)), k] = (d[np.arange(len(d)), k] + rng.integers(1, 6, size=len(d))) % np.asarray(self.dims)[k]
        return self.from_digits(d)

    def featurize(self, cands: Sequence[Any]) -> np.ndarray:
        return np.asarray([[math.log2(c.ti), math.log2(c.tj), c.vec] for c in cands], dtype=np.float32)

    def decode(self, data: dict) -> Tile:
        if data.get("kind") != "tile" or data["ti"] not in FACTORS or data["tj"] not in FACTORS:
            raise ValueError(f"not a tile of this space: {data}")
        return Tile(int(data["ti"]), int(data["tj"]), int(data["vec"]))


class TileTask(TuningTask):
    """A 32x32x32 matmul scheduled by a tile candidate."""

    def __init__(self, name: str, args: Sequence[Any], target: Any):
        self.name, self.args = name, tuple(args)
        self.target = adatune.target.create(target)
        self.workload_key = adatune.task.workload_key(name, self.args)
        n = int(self.args[0])
        self.flop = 2.0 * n**3
        A = te.placeholder((n, n), "float32", name="A")
        B = te.placeholder((n, n), "float32", name="B")
        k = te.reduce_axis((0, n), name="k")
        C = te.compute((n, n), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
        self._func = te.create_prim_func([A, B, C])
        self.arg_specs = [
            ArgSpec((n, n), "float32", False),
            ArgSpec((n, n), "float32", False),
            ArgSpec((n, n), "float32", True),
        ]
        self._space = TileSpace()

    @property
    def space(self) -> TileSpace:
        return self._space

    def scheduled_module(self, cand: Tile) -> tvm.IRModule:
        sch = tvm.s_tir.Schedule(self._func)
        i, j, kk = sch.get_loops(sch.get_sblock("C"))
        io, ii = sch.split(i, [None, cand.ti])
        jo, ji = sch.split(j, [None, cand.tj])
        sch.reorder(io, jo, kk, ii, ji)
        if cand.vec:
            sch.vectorize(ji)
        return sch.mod

    def unscheduled_module(self) -> tvm.IRModule:
        return tvm.IRModule({"main": self._func})

    def reference_outputs(self, inputs: list[np.ndarray]) -> list[np.ndarray]:
        return [inputs[0] @ inputs[1]]


register_task_kind("test/tile", TileTask)


def _cost(c: Tile) -> float:
    """A smooth recorded cost surface: best near 8x16 vectorised."""
    return 1e-4 * (1 + (math.log2(c.ti) - 3) ** 2 + (math.log2(c.tj) - 4) ** 2 + 2 * (1 - c.vec))


@pytest.fixture(scope="module")
def tile_task() -> TileTask:
    return adatune.task.create("test/tile-matmul", (32,), adatune.target.host())  # type: ignore[return-value]


def test_the_task_kind_is_created_by_name_and_applies_candidates(tile_task):
    assert isinstance(tile_task, TileTask) and not isinstance(tile_task.space, ConfigSpace)
    mod = tile_task.scheduled_module(Tile(8, 16, 1))
    assert "vectorized" in str(mod) or "T.vectorized" in mod.script()


def test_the_space_keeps_the_candidate_protocol(tile_task):
    check_candidate_space(tile_task.space)


@pytest.mark.parametrize("name", [s.name for s in tuner_specs()])
def test_every_registered_tuner_tunes_the_new_kind_and_resumes(name, tile_task):
    check_tunes_and_resumes(tile_task, _cost, name)


def test_cost_models_learn_the_new_kind_from_features(tile_task):
    check_cost_models_learn(tile_task, _cost, models=("xgb", "rfei"))


def test_records_dispatch_and_a_real_build_of_the_new_kind(tile_task):
    check_records_dispatch_and_build(tile_task, [Tile(8, 16, 1), Tile(1, 1, 0)])
