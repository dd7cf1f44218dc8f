"""ReLeASE: k-means adaptive sampling, the PPO search agent, and the tuner that combines them."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest
import torch

from adatune.cost_models import CostModel
from adatune.search.agents import PPOAgent
from adatune.search.samplers import AdaptiveSampler, knee_kmeans
from adatune.space import ConfigSpace
from adatune.tuners import ReleaseTuner, XGBTuner

torch.set_num_threads(1)


def grid_space(n_knobs: int = 6, size: int = 16, with_filter: bool = False) -> ConfigSpace:
    space = ConfigSpace()
    for k in range(n_knobs):
        space.define_knob(f"k{k}", list(range(size)))
    if with_filter:  # forbid configs whose first two knobs are both large
        space.multi_filter(lambda c: c["k0"].val + c["k1"].val < size + size // 2)
    return space


def digit_score(space: ConfigSpace, target: float = 0.7):
    """A smooth bump over the normalised knob digits, highest at ``target`` on every knob."""
    dims = np.asarray(space.dims)

    def score(digits: np.ndarray) -> np.ndarray:
        x = np.asarray(digits) / np.maximum(dims - 1, 1)
        return np.exp(-4.0 * ((x - target) ** 2).sum(axis=1))

    return score


def smooth_score(space: ConfigSpace, target: float = 0.7):
    """The same bump, scoring candidates (what an optimizer's score function receives)."""
    on_digits = digit_score(space, target)

    def score(cands: Sequence) -> np.ndarray:
        return on_digits(space.encode(cands))

    return score


# -- adaptive sampling ---------------------------------------------------------------------------------
@pytest.mark.parametrize("true_k", [10, 13])
def test_knee_finds_the_number_of_clusters(true_k):
    rng = np.random.default_rng(true_k)
    centers = rng.uniform(0, 10, size=(true_k, 4))
    points = np.concatenate([c + 0.05 * rng.standard_normal((30, 4)) for c in centers])
    found, losses = knee_kmeans(points, k_min=8, k_max=64, threshold=1.05)
    assert len(found) == true_k
    assert len(losses) == true_k - 8 + 2  # k = 8 .. true_k + 1, where the curve flattens
    # every true cluster got exactly one centroid
    nearest = np.argmin(((found[:, None, :] - centers[None]) ** 2).sum(-1), axis=1)
    assert sorted(nearest) == list(range(true_k))


def test_knee_stops_at_k_min_on_structureless_data():
    points = np.random.default_rng(0).uniform(size=(300, 6))
    found, losses = knee_kmeans(points, k_min=8, k_max=64, threshold=1.2)
    assert len(found) == 8 and len(losses) == 2


def test_sampler_batch_size_follows_the_clusters_not_the_plan_size():
    space = grid_space(4, 10)
    sampler = AdaptiveSampler(space, rng=np.random.default_rng(0))
    rng = np.random.default_rng(1)
    centers = np.asarray([[a, b, c, d] for a in (1, 8) for b in (1, 8) for c in (1, 8) for d in (1, 8)])[:12]
    rows = np.asarray([np.clip(c + rng.integers(-1, 2, size=4), 0, 9) for c in centers for _ in range(20)])
    picks = sampler.select(space.from_digits(rows), 4, visited=set())  # a plan share of 4: k is still 12
    assert len(picks) == 12 and len({p.key for p in picks}) == 12
    got = space.encode(picks)
    # one pick per cluster, each within a step of its cluster's centre on every knob
    nearest = np.argmin(np.abs(got[:, None, :] - centers[None]).sum(-1), axis=1)
    assert sorted(nearest) == list(range(12))
    assert np.abs(got - centers[nearest]).max() <= 1
    assert sampler.history == [12]


def test_sampler_never_picks_a_measured_config_twice():
    space = grid_space(3, 8)
    sampler = AdaptiveSampler(space, k_min=8, k_max=16, rng=np.random.default_rng(0))
    rows = (
        [[1, 2, 3], [6, 5, 4], [1, 5, 3]] * 30
        + [[d, d, (d + 3) % 8] for d in range(8)]
        + [[d, 7 - d, d] for d in range(8)]
    )
    cands = space.from_digits(np.asarray(rows))
    measured = {space.from_digits(np.asarray([[1, 2, 3]]))[0].key}
    for _ in range(4):  # successive batches: nothing measured before, nothing twice within a batch
        picks = sampler.select(cands, 16, measured)
        keys = [p.key for p in picks]
        assert len(set(keys)) == len(keys)
        assert not set(keys) & measured
        measured |= set(keys)


def test_sampler_measures_the_rounded_centroid_then_the_clusters_mode_then_its_nearest_member():
    space = grid_space(2, 50)
    sampler = AdaptiveSampler(space, k_min=1, k_max=1, rng=np.random.default_rng(0))
    rows = [[30, 30]] * 5 + [[10, 10]] * 2 + [[40, 40]] * 3  # repeats kept: the centroid is (29, 29)
    cands = space.from_digits(np.asarray(rows))
    key = lambda *d: space.from_digits(np.asarray([d]))[0].key  # noqa: E731
    assert [p.key for p in sampler.select(cands, 4, visited=set())] == [key(29, 29)]  # no walker stood there
    assert [p.key for p in sampler.select(cands, 4, visited={key(29, 29)})] == [key(30, 30)]  # the mode
    # centroid and mode measured: the member nearest the centroid that is not, (40, 40)
    assert [p.key for p in sampler.select(cands, 4, visited={key(29, 29), key(30, 30)})] == [key(40, 40)]
    assert [s["centroid"] for s in sampler.sources] == [1, 0, 0]
    assert [s["mode"] for s in sampler.sources] == [0, 1, 0]


def test_a_visited_centroid_is_replaced_by_the_per_dimension_mode_of_its_cluster():
    space = grid_space(2, 10)
    sampler = AdaptiveSampler(space, k_min=1, k_max=1, rng=np.random.default_rng(0))
    rows = [[1, 5]] * 3 + [[2, 9]] * 2 + [[7, 9]] * 2 + [[1, 2]]  # centroid (2.75, 6.6) rounds to (3, 7)
    cands = space.from_digits(np.asarray(rows))
    key = lambda *d: space.from_digits(np.asarray([d]))[0].key  # noqa: E731
    assert [p.key for p in sampler.select(cands, 4, visited=set())] == [key(3, 7)]
    # knob 0's mode is 1 (4 of 8), knob 1's is 9 (4 of 8): (1, 9), a config no walker stood on
    assert [p.key for p in sampler.select(cands, 4, visited={key(3, 7)})] == [key(1, 9)]


def test_a_centroid_outside_the_filters_is_replaced_too():
    space = ConfigSpace()
    space.define_knob("k0", list(range(6)))
    space.define_knob("k1", list(range(6)))
    space.multi_filter(lambda c: (c["k0"].val != 3) | (c["k1"].val != 3))  # a hole at (3, 3)
    sampler = AdaptiveSampler(space, k_min=1, k_max=1, rng=np.random.default_rng(0))
    rows = [[2, 3]] * 2 + [[4, 3], [3, 2], [3, 4]]  # around the hole: the centroid (2.8, 3) rounds into it
    picks = sampler.select(space.from_digits(np.asarray(rows)), 4, visited=set())
    # the mode: knob 0 ties 2 and 3 (the smaller wins), knob 1 is 3
    assert [tuple(r) for r in space.encode(picks)] == [(2, 3)]
    assert sampler.sources == [{"centroid": 0, "mode": 1, "member": 0}]


def test_walkers_continue_from_where_the_last_call_left_them():
    space = grid_space(4, 8)
    agent = PPOAgent(space, seed=0, parallel_size=16, step_cap=4, max_episodes=1)
    score = smooth_score(space)
    agent.find_maximums(score, 8, set())
    left = agent.points.copy()
    agent.find_maximums(score, 8, set())
    trajectory = space.encode(agent.trajectory())
    np.testing.assert_array_equal(trajectory[:16], left)  # the second call starts where the first ended
    assert len(trajectory) > 16 and len({tuple(r) for r in trajectory}) < len(trajectory)  # repeats kept


# -- the PPO agent -------------------------------------------------------------------------------------
@pytest.mark.parametrize("with_filter", [False, True])
def test_agent_actions_stay_inside_the_space(with_filter):
    space = grid_space(5, 6, with_filter=with_filter)
    agent = PPOAgent(space, seed=0, parallel_size=32, step_cap=12)
    score = digit_score(space, target=0.95)  # pulls walkers against the upper bounds
    dims = np.asarray(space.dims)
    for _ in range(3):
        start = agent.random_points(32)
        ep = agent.train_episode(score, start)
        prev = start
        for step in ep.visited:
            assert ((step >= 0) & (step < dims)).all()
            if with_filter:
                assert space.valid_digits(step).all()
            assert np.abs(step - prev).max() <= 1  # one step per knob at most
            prev = step
        assert ep.actions.min() >= 0 and ep.actions.max() <= 2


def test_agent_learns_to_raise_its_reward():
    """A real learning check: the same fixed starts, scored before and after training on other starts."""
    space = grid_space(6, 16)
    score = digit_score(space)
    agent = PPOAgent(space, seed=0, step_cap=24, stop_ratio=1.0)
    probe = agent.random_points(64)
    before = agent.run_episode(score, probe).mean_reward
    trained = [agent.train_episode(score, agent.random_points(64)).mean_reward for _ in range(20)]
    after = agent.run_episode(score, probe).mean_reward
    assert np.mean(trained[-3:]) > 2 * np.mean(trained[:3])
    assert after > 2 * before and after > 0.4


def test_agent_is_deterministic_and_records_its_steps():
    space = grid_space(4, 12)
    score = smooth_score(space)
    runs = []
    for _ in range(2):
        agent = PPOAgent(space, seed=3, parallel_size=16, step_cap=8, max_episodes=2)
        got = [[c.key for c in agent.find_maximums(score, 10, exclusive=set())] for _ in range(2)]
        runs.append(got)
        assert len(agent.steps_history) == 2 and 1 <= agent.last_steps <= 16
        assert all(len(g) == 10 and len(set(g)) == 10 for g in got)
    assert runs[0] == runs[1]


def test_find_maximums_skips_excluded_and_ranks_by_score():
    space = grid_space(3, 10)
    score = smooth_score(space)
    agent = PPOAgent(space, seed=1, parallel_size=16, step_cap=8, max_episodes=2)
    excluded = {str(i) for i in range(0, len(space), 2)}
    top = agent.find_maximums(score, 20, excluded)
    assert len(top) == 20 and not {c.key for c in top} & excluded
    s = score(top)
    assert (np.diff(s) <= 1e-12).all()


# -- the tuners ----------------------------------------------------------------------------------------
class _BumpModel(CostModel):
    """A non-XGBoost cost model (any ``CostModel`` rewards the agent): a fixed smooth bump over features."""

    def __init__(self):
        self.fits = 0

    def fit(self, xs, ys, plan_size):
        assert xs.ndim == 2  # cost models see feature matrices
        self.fits += 1

    def predict(self, xs):
        x = np.asarray(xs, dtype=np.float64)
        x = x / np.maximum(np.abs(x).max(axis=0), 1e-9)
        return np.exp(-4.0 * ((x - 0.6) ** 2).sum(axis=1))


def test_release_tuner_with_any_cost_model(matmul_task, replay_option):
    model = _BumpModel()
    tuner = ReleaseTuner(
        matmul_task, plan_size=16, cost_model=model, seed=0, agent_options={"parallel_size": 16, "step_cap": 8}
    )
    tuner.tune(n_trial=64, measure_option=replay_option, batch_size=16)
    measured = [t.index for t in tuner.trials]
    assert len(measured) == 64 and len(set(measured)) == 64
    assert model.fits == tuner.train_ct >= 2
    net = tuner.agent.net
    assert tuner.agent.steps_history and all(s >= 1 for s in tuner.agent.steps_history)
    tuner.tune(n_trial=16, measure_option=replay_option, batch_size=16)
    assert tuner.agent.net is net  # the policy is kept across tuning iterations


def test_adaptive_sampling_refits_after_each_sampled_batch(matmul_task, replay_option):
    tuner = XGBTuner(matmul_task, plan_size=16, sampler="adaptive", seed=0)
    tuner.tune(n_trial=80, measure_option=replay_option, batch_size=16)
    history = tuner.sampler.history
    assert history and all(1 <= n <= 64 for n in history)  # k by the knee rule, not capped at the plan size
    # 16 random trials, then each sampled batch is measured and the model refit before the next one; the centroids
    # are the whole plan (ReLeASE's Algorithm 2): no epsilon-greedy share unless eps_greedy is given
    splits = tuner.exploration.splits
    assert tuner.train_ct == len(history) == len(splits) and splits == [(m, 0) for m in history]
    assert tuner.eps_greedy == 0.0
    plans = [m + r for m, r in splits]
    assert 16 + sum(plans[:-1]) <= 80 < 16 + sum(plans)
    assert len({t.index for t in tuner.trials}) == len(tuner.trials) == 80


@pytest.mark.parametrize("make", [XGBTuner, ReleaseTuner], ids=["xgb", "release"])
def test_an_explicit_eps_greedy_adds_its_random_share_to_adaptive_sampling(matmul_task, replay_option, make):
    kwargs = {"agent_options": {"parallel_size": 16, "step_cap": 8}} if make is ReleaseTuner else {}
    tuner = make(matmul_task, plan_size=16, sampler="adaptive", eps_greedy=0.25, seed=0, **kwargs)
    tuner.tune(n_trial=64, measure_option=replay_option, batch_size=16)
    splits = tuner.exploration.splits
    assert splits and all(r == 4 for _, r in splits)  # 0.25 of the 16-trial plan, on top of the centroids
    assert XGBTuner(matmul_task, seed=0).eps_greedy == 0.05  # without a sampler: AutoTVM's default
