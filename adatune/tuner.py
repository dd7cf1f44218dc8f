"""AutoTVM's ``autotvm.tuner`` spelling of ``adatune.tuners``, so ``import adatune as autotvm`` then
``autotvm.tuner.XGBTuner(task)`` works unchanged. Loaded on first use (``adatune.tuner``), like ``tuners``.

AutoTVM's ``GATuner`` and ``DropletTuner`` have no adatune equivalent; the adatune tuners (``RFEITuner``,
``ReleaseTuner``, ``TraceSearchTuner``) are here beside AutoTVM's.
"""

from .tuners import (
    GridSearchTuner,
    ModelBasedTuner,
    RandomTuner,
    ReleaseTuner,
    RFEITuner,
    TraceSearchTuner,
    Tuner,
    XGBTuner,
    callback,
)

__all__ = [
    "Tuner",
    "ModelBasedTuner",
    "RandomTuner",
    "GridSearchTuner",
    "XGBTuner",
    "RFEITuner",
    "ReleaseTuner",
    "TraceSearchTuner",
    "callback",
]
