"""Every tuner the library ships, as ``name -> factory(task, seed)``; adatune.testing's tuner checks run on them
all. Add a new tuner here and it is tested like the others."""

from __future__ import annotations

from adatune.testing import TunerFactory
from adatune.tuners import GridSearchTuner, RandomTuner, ReleaseTuner, RFEITuner, TraceSearchTuner, XGBTuner

TUNER_FACTORIES: dict[str, TunerFactory] = {
    "random": lambda task, seed: RandomTuner(task, seed=seed),
    "grid": lambda task, seed: GridSearchTuner(task, seed=seed),
    "xgb": lambda task, seed: XGBTuner(task, plan_size=16, seed=seed),
    "xgb-rank-diverse": lambda task, seed: XGBTuner(
        task, plan_size=16, loss_type="rank", diversity_filter_ratio=2, seed=seed
    ),
    "xgb-adaptive": lambda task, seed: XGBTuner(task, plan_size=16, sampler="adaptive", seed=seed),
    # fewer walkers and episodes than the paper's (64, 4): the checks are about the loop (the agent's own search is
    # tested in test_release), and exhausting the fixture's space trains the agent once per plan
    "release": lambda task, seed: ReleaseTuner(
        task, plan_size=16, agent_options={"parallel_size": 8, "max_episodes": 1}, seed=seed
    ),
    "rfei": lambda task, seed: RFEITuner(task, plan_size=16, n_trees=32, seed=seed),
    "rfei-sa-trees": lambda task, seed: RFEITuner(
        task, plan_size=16, n_trees=32, uncertainty="trees", contextual=False, seed=seed
    ),
    # trace search's evolutionary loop uses only the candidate protocol, so it also runs on the knob fixture
    "trace-search": lambda task, seed: TraceSearchTuner(
        task, plan_size=16, population_size=32, genetic_num_iters=1, seed=seed
    ),
}
