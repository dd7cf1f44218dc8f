"""What a T the tuner did not sample votes on: predictions anchored to each kernel's timings (hand examples)."""

from __future__ import annotations

import numpy as np
import pytest

from adatune.dietcode import DietCodeTuner
from adatune.dietcode._select import calibrated_costs
from adatune.dietcode._tune import DISPATCH_COSTS


def test_calibration_interpolates_each_kernels_error_between_its_timings() -> None:
    ts = [1, 2, 3, 4]
    pred = np.array([[1.0, 1.0, 1.0, 1.0], [2.5, 2.5, 2.5, 2.5], [1.0, 2.0, 3.0, 4.0]])
    timed = np.array([[2.0, np.nan, np.nan, 4.0], [np.nan] * 4, [np.nan, 1.0, np.nan, np.nan]])
    got = calibrated_costs(pred, timed, ts)
    # kernel 0: measured 2x the model at T=1 and 4x at T=4; in between the ratio moves geometrically
    np.testing.assert_allclose(got[0], [2.0, 2 ** (4 / 3), 2 ** (5 / 3), 4.0])
    np.testing.assert_allclose(got[1], pred[1])  # never timed: the model's own prediction
    np.testing.assert_allclose(got[2], [0.5, 1.0, 1.5, 2.0])  # one timing: its ratio (0.5) everywhere
    votes = got.argmin(axis=0)
    assert list(votes) == [2, 2, 2, 2]  # the model alone would vote kernel 0 at T = 2, 3 (pred 1.0 < 2.0, 3.0, 2.5)


def test_calibration_keeps_the_timings_and_names_bad_shapes() -> None:
    ts = [5, 9, 20]
    pred = np.array([[3.0, 4.0, 5.0]])
    timed = np.array([[np.nan, 7.0, np.nan]])
    got = calibrated_costs(pred, timed, ts)
    assert got[0, 1] == 7.0
    np.testing.assert_allclose(got[0], pred[0] * 7.0 / 4.0)
    with pytest.raises(ValueError, match="matrices"):
        calibrated_costs(pred, timed[:, :2], ts)


def test_calibrated_is_a_declared_dispatch_cost() -> None:
    assert "calibrated" in DISPATCH_COSTS
    option = next(o for o in DietCodeTuner.OPTIONS if o.name == "dispatch_costs")
    assert "calibrated" in option.choices


def test_verified_labels_take_the_fastest_timing_where_the_generic_version_serves() -> None:
    from adatune.dietcode._select import verified_labels

    timed = np.array([[3.0, 3.0, 3.0, 3.0], [2.0, 4.0, 1.0, np.inf], [1.0, 5.0, 5.0, 1.0]])
    aligned = np.zeros_like(timed, dtype=bool)
    aligned[0, 2] = True  # kernel 0 runs its untimed aligned version at the third T: kept
    labels, changed = verified_labels([0, 0, 0, 1], timed, aligned)
    assert labels == [2, 0, 0, 2] and changed == 2  # the failing kernel 1 loses its T to the fastest timed
    assert verified_labels([1, 0, 0, 0], np.full((2, 4), np.inf), np.zeros((2, 4), bool)) == ([1, 0, 0, 0], 0)
    with pytest.raises(ValueError, match="matrices"):
        verified_labels([0, 0], timed, aligned)


def test_verify_times_the_deployed_kernels_at_every_t_and_serves_each_with_the_fastest(
    tmp_path, dietcode_option
) -> None:
    """A real (small) run with ``verify``: one record per deployed kernel with a timing at every T of the range,
    and every T whose kernel runs its generic version served by the kernel timed fastest there."""
    import json

    import adatune
    from adatune.dietcode import DynamicWorkload, aligned_versions

    wl = DynamicWorkload("v_context", "bmm_nn", (2, 16), (1, 12))
    log = str(tmp_path / "v.jsonl")
    tuner = DietCodeTuner(wl, adatune.target.host(), n_shapes=3, rounds=1, kernels_per_round=4, seed=2,
                          number=1, repeat=1, min_repeat_ms=1, verify=True, population=24, generations=1)  # fmt: skip
    tuner.tune(measure_option=dietcode_option, callbacks=[adatune.callback.log_to_file(log)])
    res = tuner.result()
    v = res.verification
    assert v["kernels_timed"] >= v["kernels_kept"] == len(res.kernels) >= 1 and v["seconds"] > 0
    records = [json.loads(line) for line in open(log, encoding="utf-8")]
    full = [r for r in records if r["task"][1][1] == list(range(1, 13))]
    assert len(full) == v["kernels_timed"] and len(records) > len(full)  # the rounds' records, then these
    timed = {r["key"]: {p["at"][0]: float(np.median(p["costs"])) for p in r["result"]["extra"]["points"]}
             for r in full if r["result"]["error_no"] == 0}  # fmt: skip
    aligns = dict(zip([k.key for k in res.kernels], aligned_versions(wl, res.kernels)))
    for t in range(1, 13):
        key = res.kernel_for(t).key
        if aligns[key] and t % aligns[key] == 0:
            continue  # its aligned version serves T: kept or chosen on its generic timing, an upper bound
        assert timed[key][t] == min(s[t] for s in timed.values()), f"T={t}: {key} is not the fastest timed"
    dk = res.build()
    for t in (1, 7, 12):
        a, b = wl.random_inputs(t, np.random.default_rng(t))
        np.testing.assert_allclose(dk(t, a, b), wl.reference(a, b), rtol=1e-4, atol=1e-4)
