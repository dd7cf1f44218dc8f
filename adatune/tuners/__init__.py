"""Tuners: the shared tuning loop and the strategies that choose what to measure."""

from . import callback
from ._base import RandomStreams, RoundLog, TrialLog, Tuner, VisitedKeys
from ._model_based import ModelBasedTuner, Sampler, submodular_pick
from ._registry import TUNER_NAMES, TunerOption, TunerSpec, create_tuner, get_tuner_spec, register_tuner, tuner_specs
from ._release import ReleaseTuner
from ._rfei import RFEITuner
from ._simple import GridSearchTuner, RandomTuner
from ._trace import TraceSearchTuner
from ._xgb import XGBTuner

__all__ = [
    "Tuner",
    "TrialLog",
    "RoundLog",
    "RandomStreams",
    "VisitedKeys",
    "callback",
    "ModelBasedTuner",
    "Sampler",
    "submodular_pick",
    "RandomTuner",
    "GridSearchTuner",
    "XGBTuner",
    "ReleaseTuner",
    "RFEITuner",
    "TraceSearchTuner",
    "TUNER_NAMES",
    "create_tuner",
    "TunerOption",
    "TunerSpec",
    "get_tuner_spec",
    "register_tuner",
    "tuner_specs",
]
