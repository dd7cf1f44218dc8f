"""Evidence that the method's parts compute what the papers say (issue 9 item 5).

forestci's calibrated jackknife, GAE and PPO's clipped objective on hand-computed numbers, one first plan
per seed across schemes, the adaptive sampler choosing only offered candidates, and itervar feature
failures reported instead of silently zeroed.
"""

from __future__ import annotations

import logging
import math

import numpy as np
import pytest
import torch

import adatune
from adatune.cost_models.features import FeatureExtractor
from adatune.cost_models.rfei import RFEICostModel
from adatune.search.agents.ppo import Episode, PPOAgent
from adatune.search.samplers import AdaptiveSampler
from adatune.tuners import ReleaseTuner, RFEITuner, XGBTuner

# -- AdaTune: forestci's calibrated infinitesimal jackknife ---------------------------------------------


def test_rfei_calibrated_variance_equals_forestci_calibrated(matmul_task, monkeypatch):
    """With the calibration fitted on the query batch itself and the same half forest, the model's variance
    is ``forestci.random_forest_error(..., calibrate=True)`` on that batch (clipped at zero)."""
    import forestci

    space = matmul_task.config_space
    rng = np.random.default_rng(11)
    train = rng.choice(len(space), size=60, replace=False)
    x_train = np.asarray(space.featurize([space.get(int(i)) for i in train]), dtype=np.float32)
    y_train = 1.0 + x_train @ rng.normal(size=x_train.shape[1]) * 0.1 + rng.normal(scale=0.05, size=len(train))
    y_train = np.abs(y_train)
    queries = np.asarray(space.featurize(space.random_candidates(np.random.default_rng(5), 256)), dtype=np.float32)
    assert len(queries) >= 200  # forestci interpolates its calibration on percentiles from 200 points on

    model = RFEICostModel(matmul_task, n_trees=60, calibrate=True, seed=3, reference=lambda _rng, _n: queries)
    model.fit(x_train, y_train, plan_size=16)
    assert model.uncertainty_used == "forestci" and model._calib is not None

    # the model drew its half forest from this generator (seeded per fit, counted after the fit)
    half_perm = np.random.default_rng(model.seed + 7919 * model._n_fits).permutation(model.n_trees)
    monkeypatch.setattr(np.random, "permutation", lambda n: half_perm[:n] if n == len(half_perm) else None)
    expected = forestci.random_forest_error(model.forest, x_train.shape, queries, calibrate=True)
    monkeypatch.undo()

    _, std = model.predict_mean_std(queries)
    got_var = (std / model.scale) ** 2
    np.testing.assert_allclose(got_var, np.maximum(expected, 0.0), rtol=1e-6, atol=1e-12)
    # the calibration changed something: it is not the raw jackknife
    raw = forestci.random_forest_error(model.forest, x_train.shape, queries, calibrate=False)
    assert not np.allclose(np.maximum(raw, 0.0), got_var)


# -- ReLeASE: GAE and the clipped PPO objective ---------------------------------------------------------


def _agent(matmul_task, **kw) -> PPOAgent:
    return PPOAgent(matmul_task.config_space, seed=0, parallel_size=1, **kw)


def _episode(agent: PPOAgent, rewards, values, last_value, log_prob_shift=None) -> Episode:
    """A one-walker episode over fixed states; log-probs are the net's current ones minus ``shift``."""
    steps = len(rewards)
    knobs = len(agent.dims)
    states = torch.linspace(-1, 1, steps * knobs, dtype=torch.float32).reshape(steps, 1, knobs)
    actions = torch.as_tensor(np.arange(steps * knobs).reshape(steps, 1, knobs) % 3, dtype=torch.int64)
    with torch.no_grad():
        logits, _ = agent.net(states.reshape(steps, knobs))
        cur = agent._log_prob(logits, actions.reshape(steps, knobs)).reshape(steps, 1)
    shift = torch.zeros(steps, 1) if log_prob_shift is None else torch.as_tensor(log_prob_shift).reshape(steps, 1)
    return Episode(
        states=states,
        actions=actions,
        log_probs=cur - shift.float(),
        values=torch.as_tensor(values, dtype=torch.float32).reshape(steps, 1),
        rewards=torch.as_tensor(rewards, dtype=torch.float32).reshape(steps, 1),
        last_value=torch.as_tensor([last_value], dtype=torch.float32),
        raw_rewards=np.asarray(rewards, dtype=np.float64).reshape(steps, 1),
        visited=np.zeros((steps, 1, knobs), dtype=np.int64),
        final_points=np.zeros((1, knobs), dtype=np.int64),
    )


def test_gae_matches_hand_computation(matmul_task):
    """gamma = 0.5, lambda = 0.5, rewards (1, 0, 2), values (0.5, 1, 0), bootstrap value 4:
    deltas: d2 = 2 + 0.5*4 - 0 = 4; d1 = 0 + 0.5*0 - 1 = -1; d0 = 1 + 0.5*1 - 0.5 = 1.
    A2 = 4; A1 = -1 + 0.25*4 = 0; A0 = 1 + 0.25*0 = 1. Returns = A + V = (1.5, 1, 4)."""
    agent = _agent(matmul_task, gamma=0.5, gae_lambda=0.5)
    ep = _episode(agent, rewards=[1.0, 0.0, 2.0], values=[0.5, 1.0, 0.0], last_value=4.0)
    adv, ret = agent.advantages(ep)
    np.testing.assert_allclose(adv.numpy().ravel(), [1.0, 0.0, 4.0], atol=1e-6)
    np.testing.assert_allclose(ret.numpy().ravel(), [1.5, 1.0, 4.0], atol=1e-6)


def test_gae_with_lambda_one_is_discounted_return_minus_value(matmul_task):
    """lambda = 1: A_t = sum_k gamma^k r_{t+k} + gamma^(T-t) V_T - V_t (Monte Carlo with bootstrap)."""
    agent = _agent(matmul_task, gamma=0.9, gae_lambda=1.0)
    r, v, last = [0.3, -0.2, 0.7, 1.1], [0.1, 0.4, -0.3, 0.2], 0.5
    ep = _episode(agent, rewards=r, values=v, last_value=last)
    adv, _ = agent.advantages(ep)
    want = [sum(0.9**k * r[t + k] for k in range(4 - t)) + 0.9 ** (4 - t) * last - v[t] for t in range(4)]
    np.testing.assert_allclose(adv.numpy().ravel(), want, atol=1e-5)


def test_ppo_clipped_objective_on_known_ratios(matmul_task):
    """Old log-probs set so the ratios are (1.5, 0.5, 1.1, 0.9); with clip 0.3 the policy loss is
    -mean(min(r*A, clip(r, 0.7, 1.3)*A)) over standardised advantages, computed here by hand."""
    agent = _agent(matmul_task, gamma=0.5, gae_lambda=0.5, epochs=1, minibatch_size=64, clip=0.3)
    ratios = np.array([1.5, 0.5, 1.1, 0.9])
    rewards, values, last = [2.0, -1.0, 0.5, -0.5], [0.0, 0.0, 0.0, 0.0], 0.0
    ep = _episode(agent, rewards, values, last, log_prob_shift=np.log(ratios))
    # GAE by hand (values 0, bootstrap 0): A3 = -0.5, A2 = 0.5 + 0.25*(-0.5), A1 = -1 + 0.25*A2, A0 = 2 + 0.25*A1
    a3 = -0.5
    a2 = 0.5 + 0.25 * a3
    a1 = -1.0 + 0.25 * a2
    a0 = 2.0 + 0.25 * a1
    raw = np.array([a0, a1, a2, a3])
    std_adv = (raw - raw.mean()) / (raw.std(ddof=1) + 1e-8)  # torch's std is the sample std
    clipped = np.clip(ratios, 0.7, 1.3)
    want_policy = -np.mean(np.minimum(ratios * std_adv, clipped * std_adv))
    with torch.no_grad():
        _, value_now = agent.net(ep.states.reshape(4, -1))
    want_value = float(np.mean((raw - value_now.numpy()) ** 2))  # returns = A + V with V = 0

    stats = agent.learn(ep)
    assert stats["policy_loss"] == pytest.approx(want_policy, rel=1e-4, abs=1e-6)
    assert stats["value_loss"] == pytest.approx(want_value, rel=1e-4, abs=1e-6)
    # the unclipped objective differs here, so the test would notice a missing clip
    unclipped = -np.mean(ratios * std_adv)
    assert abs(unclipped - want_policy) > 1e-3


# -- every scheme of one seed measures the same first plan ---------------------------------------------


def test_schemes_of_one_seed_measure_the_same_first_plan(matmul_task, replay_option):
    plan_size = 16
    tuners = [
        XGBTuner(matmul_task, plan_size=plan_size, seed=3),
        RFEITuner(matmul_task, plan_size=plan_size, n_trees=16, seed=3),
        ReleaseTuner(matmul_task, plan_size=plan_size, seed=3, agent_options={"parallel_size": 8, "step_cap": 4}),
    ]
    plans = [[str(c.key) for c in t.plan] for t in tuners]
    assert len(plans[0]) == plan_size and plans[0] == plans[1] == plans[2]
    for t in tuners:
        t.tune(plan_size, replay_option, batch_size=8)
    measured = [[tr.key for tr in t.trials[:plan_size]] for t in tuners]
    assert measured[0] == plans[0] and measured[0] == measured[1] == measured[2]
    # and another seed draws another plan
    other = XGBTuner(matmul_task, plan_size=plan_size, seed=4)
    assert [str(c.key) for c in other.plan] != plans[0]


# -- ReLeASE's adaptive sampler: valid, unmeasured configs from the search's trajectory --------------------------------


def test_adaptive_sampler_picks_only_valid_unvisited_configs(matmul_task):
    space = matmul_task.config_space
    offered = space.random_candidates(np.random.default_rng(1), 120)
    offered = offered + offered[:30]  # repeats, as an optimizer's trajectory has them
    visited = {str(c.key) for c in offered[:20]}
    sampler = AdaptiveSampler(space, k_min=4, k_max=24, rng=np.random.default_rng(2))
    picks = sampler.select(offered, 24, visited)
    keys = [str(c.key) for c in picks]
    assert 4 <= len(picks) <= 24
    assert all(space.is_index_valid(int(k)) for k in keys)  # rounded centroids and modes stay in the space
    assert not set(keys) & visited
    assert len(set(keys)) == len(keys)
    assert sampler.history[-1] == len(picks)
    # everything offered is visited: nothing to pick
    assert sampler.select(offered[:5], 4, {str(c.key) for c in offered[:5]}) == []


def test_the_sampler_clusters_the_optimizers_trajectory_with_its_repeats(matmul_task, replay_option):
    class Recorder:
        def __init__(self) -> None:
            self.seen: list[int] = []

        def select(self, candidates, num, visited):  # noqa: ANN001, ANN201
            self.seen.append(len(candidates))
            self.distinct = len({c.key for c in candidates})
            return list(candidates)[:3]

    rec = Recorder()
    tuner = XGBTuner(matmul_task, plan_size=8, sampler=rec, seed=0)
    tuner.tune(11, replay_option, batch_size=8)
    sa = tuner.model_optimizer
    assert len(rec.seen) == tuner.train_ct == 2  # after the 8 random trials and after the 3 sampled ones
    assert rec.seen[-1] == len(sa.trajectory())  # the whole trajectory, not the 32 best
    assert rec.seen[-1] > 32 and rec.distinct < rec.seen[-1]  # walkers dwell: repeats kept
    assert len(tuner.plan) == 3 + tuner.exploration.splits[-1][1]  # the sampler set the plan's length


# -- itervar features: failures are reported, rows are missing (NaN), not zeros ------------------------


def test_itervar_instantiation_error_is_reported_not_zeroed(caplog):
    from fixture_templates import MODES

    task = adatune.task.create("test/faulty", (64,), adatune.target.host())
    space = task.config_space
    bad = next(space.get(i) for i in range(len(space)) if space.get(i)["mode"].val == "instantiate_fail")
    good = next(space.get(i) for i in range(len(space)) if space.get(i)["mode"].val == "ok")
    assert "instantiate_fail" in MODES
    fx = FeatureExtractor(task, feature_type="itervar")
    with caplog.at_level(logging.WARNING, logger="adatune.cost_models.features"):
        rows = fx([good, bad])
    assert rows.shape[0] == 2
    assert np.isfinite(rows[0]).all() and np.any(rows[0] != 0)
    assert np.isnan(rows[1]).all()
    assert str(bad.key) in fx.failures and str(good.key) not in fx.failures
    assert any(str(bad.key) in r.getMessage() and "failed" in r.getMessage() for r in caplog.records)
    assert not math.isnan(float(rows[0].sum()))
