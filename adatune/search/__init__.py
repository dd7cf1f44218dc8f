"""Search: what a tuner measures next, given its cost model's scores. ``optimizers`` (simulated annealing,
evolutionary search, the exploration policy), ``agents`` (ReLeASE's PPO agent, torch) and ``samplers`` (k-means
adaptive sampling, scikit-learn); the latter two load on first use.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from . import optimizers

__all__ = ["optimizers", "agents", "samplers"]

_ON_FIRST_USE = ("agents", "samplers")


def __getattr__(name: str) -> ModuleType:
    if name in _ON_FIRST_USE:
        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
