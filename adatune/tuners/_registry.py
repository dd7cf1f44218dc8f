"""Tuners by name, for the CLI and the benchmarks (new tuners are found once they are exported here)."""
from __future__ import annotations

from typing import Any

from ..task import Task
from ._base import Tuner

__all__ = ["TUNER_NAMES", "create_tuner"]

TUNER_NAMES = ("xgb", "xgb-rank", "random", "grid", "rfei", "release")


def create_tuner(name: str, task: Task, seed: int | None = None, **kwargs: Any) -> Tuner:
    """``create_tuner("xgb", task, seed=0)``; keyword arguments go to the tuner's constructor."""
    from . import GridSearchTuner, RandomTuner, XGBTuner

    if name == "xgb":
        return XGBTuner(task, seed=seed, **kwargs)
    if name == "xgb-rank":
        return XGBTuner(task, loss_type="rank", seed=seed, **kwargs)
    if name == "random":
        return RandomTuner(task, seed=seed)
    if name == "grid":
        return GridSearchTuner(task, seed=seed)
    if name == "rfei":
        from ._rfei import RFEITuner

        return RFEITuner(task, seed=seed, **kwargs)
    if name == "release":
        from ._release import ReleaseTuner

        return ReleaseTuner(task, seed=seed, **kwargs)
    raise ValueError(f"unknown tuner {name!r}: choose from {', '.join(TUNER_NAMES)}")
