"""Config spaces: AutoTVM's mixed-radix indexing, split policies, filters, sampling and features."""

from __future__ import annotations

import math

import numpy as np
import pytest

import adatune
from adatune.space import ConfigSpace, SplitSpace


def _space() -> ConfigSpace:
    s = ConfigSpace()
    s.define_split("a", 16, num_outputs=3)
    s.define_knob("b", [0, 1, 2])
    s.define_reorder("c", 3, policy="all")
    s.define_annotate("d", 2, policy="try_unroll_vec")
    return s


def test_mixed_radix_round_trip_first_knob_least_significant():
    s = _space()
    # try_unroll_vec on 2 loops: none/unroll on each, 'vec' only on the innermost
    assert s.dims == [15, 3, 6, 8] and len(s) == s.range_length == 15 * 3 * 6 * 8
    for i in [0, 1, 14, 15, 44, len(s) - 1]:
        assert s.knob2point(s.point2knob(i)) == i
    assert s.point2knob(1) == [1, 0, 0, 0]
    assert s.point2knob(15) == [0, 1, 0, 0]
    cfg = s.get(15 + 45 * 2)
    assert cfg["b"].val == 1 and cfg["c"].perm == s.space_map["c"][2].perm
    with pytest.raises(IndexError, match="outside the space"):
        s.point2knob(len(s))


@pytest.mark.parametrize(
    "policy,extent,n,expect",
    [
        ("factors", 12, 2, [(12, 1), (6, 2), (4, 3), (3, 4), (2, 6), (1, 12)]),
        ("power2", 12, 2, [(12, 1), (6, 2), (3, 4), (-1, 8)]),
    ],
)
def test_split_policies(policy, extent, n, expect):
    assert sorted(tuple(e.size) for e in SplitSpace(extent, n, policy=policy).entities) == sorted(expect)


def test_split_factors_multiply_to_extent_and_respect_max_factor():
    sp = SplitSpace(64, num_outputs=4, max_factor=8)
    for e in sp.entities:
        assert math.prod(e.size) == 64 and max(e.size[1:]) <= 8
    verbose = SplitSpace(24, 2, policy="verbose")
    assert {e.size[1] for e in verbose.entities} >= {1, 2, 3, 4, 6, 8, 12, 16, 24}


def test_filters_knob_and_multi():
    s = ConfigSpace()
    s.define_split("t", 32, num_outputs=2, filter=lambda e: e.size[1] >= 4)
    s.define_knob("k", [1, 2, 3, 4])
    assert all(e.size[1] >= 4 for e in s.space_map["t"].entities)
    s.multi_filter(lambda c: c["t"].size[1] * c["k"].val <= 16)
    rng = np.random.default_rng(0)
    for i in s.sample(rng, 10):
        c = s.get(i)
        assert c["t"].size[1] * c["k"].val <= 16
    walk = s.sample(rng, 1)[0]
    for _ in range(50):
        walk = s.random_walk(walk, rng)
        assert s.is_index_valid(walk)
    # AutoTVM semantics: len() counts only configs that pass multi_filter, range_length the whole range
    assert len(s.valid_indices()) == len(s) == sum(s.is_index_valid(i) for i in range(s.range_length))
    assert len(s) < s.range_length

    pts = np.asarray(s.sample(rng, 5), dtype=np.int64)
    for _ in range(20):
        pts = s.random_walk_batch(pts, rng)
        assert all(s.is_index_valid(int(p)) for p in pts)


def test_an_unpruned_space_ignores_multi_filter_but_restrict_applies():
    """A template's pruning (multi_filter) is off in AutoTVM's unpruned space; a study's restriction is not."""
    s = ConfigSpace()
    s.prune(False)
    s.define_split("t", 32, num_outputs=2)
    s.define_knob("k", [1, 2, 3, 4])
    full = len(s)
    s.multi_filter(lambda c: c["k"].val == 1)
    assert len(s) == full  # the template's pruning is ignored
    s.restrict(lambda c: c["k"].val == 1)
    assert 0 < len(s) == full // 4
    assert all(s.get(i)["k"].val == 1 for i in s.valid_indices())
    with pytest.raises(TypeError, match="restrict needs a callable"):
        s.restrict(3)  # type: ignore[arg-type]


def _launch_space(array_safe: bool) -> ConfigSpace:
    """A CUDA-like space whose filter reads every knob (a table of ~100k rows), written either way."""
    s = ConfigSpace()
    s.define_split("y", 1024, num_outputs=4)
    s.define_split("x", 256, num_outputs=3)
    s.define_split("k", 16, num_outputs=2)
    s.define_knob("u", [0, 16, 64])

    def launchable(c):  # noqa: ANN001, ANN202
        y, x = c["y"].size, c["x"].size
        threads, acc = y[2] * x[1], y[1] * y[3] * x[2] * c["k"].size[-1] + c["u"].val
        if array_safe:
            return (32 <= threads) & (threads <= 512) & (acc <= 80)
        return 32 <= threads <= 512 and acc <= 80

    s.multi_filter(launchable)
    return s


def test_filters_evaluated_on_arrays_agree_with_rows(monkeypatch):
    from adatune.space import _filter

    used = []
    by_arrays = _filter.ValidIndexSet._table_by_arrays

    def spy(self, *args):  # noqa: ANN001, ANN002, ANN202
        out = by_arrays(self, *args)
        used.append(out is not None)
        return out

    monkeypatch.setattr(_filter.ValidIndexSet, "_table_by_arrays", spy)
    fast, slow = _launch_space(True), _launch_space(False)
    len(fast), len(slow)
    assert used == [True, False]  # the &-form runs on arrays; `and` on an array raises, so rows are used
    assert fast.range_length > 65536  # large enough for the array path
    assert len(fast) == len(slow) > 0
    rng = np.random.default_rng(3)
    idx = rng.integers(0, fast.range_length, size=4000)
    assert np.array_equal(fast.are_valid(idx), slow.are_valid(idx))
    for i in fast.sample(rng, 50):
        c = fast.get(i)
        y, x = c["y"].size, c["x"].size
        assert 32 <= y[2] * x[1] <= 512 and y[1] * y[3] * x[2] * c["k"].size[-1] + c["u"].val <= 80


def test_a_filter_of_entity_texts_keeps_the_few_configs_it_names_in_a_large_space():
    """``str(cfg[name])`` on a block of rows gives one answer for the block (False when few configs pass): the
    array path must not take it for every row's (a partial sweep's 928 of 4.9M configs restricted to none)."""
    s = _launch_space(True)
    names = list(s.space_map)
    picked = [int(i) for i in np.random.default_rng(0).choice(s.valid_indices(), 5, replace=False)]
    texts = {tuple(str(s.get(i)[n]) for n in names) for i in picked}
    s.restrict(lambda c: tuple(str(c[n]) for n in names) in texts)
    assert sorted(s.valid_indices().tolist()) == sorted(picked)


def test_sample_is_distinct_and_excludes():
    s = _space()
    rng = np.random.default_rng(1)
    got = s.sample(rng, 100, exclude=range(50))
    assert len(set(got)) == 100 and min(got) >= 50


def test_bad_definitions_are_named():
    s = ConfigSpace()
    s.define_knob("x", [1])
    s.define_knob("x", [2, 3])  # AutoTVM: defining a knob again overrides it
    assert [e.val for e in s.space_map["x"].entities] == [2, 3]
    with pytest.raises(ValueError, match="unknown split policy"):
        s.define_split("y", 8, policy="nope")
    with pytest.raises(ValueError, match="no candidate passes"):
        s.define_split("z", 8, filter=lambda e: False)
    with pytest.raises(KeyError, match="before it is defined"):
        s["w"]


def test_task_space_features_and_flop(matmul_task):
    space = matmul_task.config_space
    assert matmul_task.flop == 2 * 32**3
    assert space.knob_names == ["tile_i", "tile_j", "tile_k", "vec"]
    from adatune.cost_models.features import FeatureExtractor

    knob = FeatureExtractor(matmul_task, "knob")
    f = knob([0, 5, len(space) - 1])
    assert f.shape[0] == 3 and np.allclose(f[1], space.knob_features(5))
    itervar = FeatureExtractor(matmul_task, "itervar")
    g = itervar([0, 5])
    assert g.shape[0] == 2 and not np.allclose(g[0], g[1])


def test_itervar_features_are_computed_once_per_task_and_candidate(matmul_task, monkeypatch):
    """Itervar rows apply the candidate: a second extractor of the same task (another seed or scheme of a study)
    reuses the first one's rows instead of scheduling again."""
    from adatune.cost_models.features import FeatureExtractor

    first = FeatureExtractor(matmul_task, "itervar")
    rows = first([1, 2, 3])
    second = FeatureExtractor(matmul_task, "itervar")

    def no_schedule(cand):  # noqa: ANN001, ANN202 - stands in for scheduled_module
        raise AssertionError(f"candidate {cand.key} was scheduled again")

    monkeypatch.setattr(matmul_task, "scheduled_module", no_schedule)
    np.testing.assert_array_equal(second([1, 2, 3]), rows)


def test_unknown_template_and_bad_target():
    with pytest.raises(KeyError, match="no template named"):
        adatune.task.create("nope", (1,))
    with pytest.raises(ValueError, match="JSON dicts"):
        adatune.target.create("llvm -mcpu=native")


def test_host_target_is_detected():
    t = adatune.target.host()
    d = adatune.target.to_json(t)
    assert d["kind"] == "llvm" and d["mcpu"] not in ("", "generic") and d["num-cores"] >= 1
    assert d["mtriple"].endswith("linux-gnu") and "conda" not in d["mtriple"]
