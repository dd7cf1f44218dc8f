"""Search: what a tuner measures next, given its cost model's scores.

``optimizers`` walk the candidate space for what the model scores best (simulated annealing, evolutionary search)
under the one exploration policy that decides how much of each plan is random; ``agents`` holds ReLeASE's PPO agent,
which stands in for an optimizer; ``samplers`` ReLeASE's k-means adaptive sampling. The agent (torch) and the
sampler (scikit-learn) load on first use, so a tuner that uses neither never imports them.
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
