"""adatune: adaptive, fast auto-tuning of tensor programs on Apache TVM 0.27.

AutoTVM-style use (``task.create``, ``measure_option``, ``tuners.XGBTuner(task).tune(...)``) works as in AutoTVM;
an AutoTVM script runs with one changed line, ``import adatune as autotvm`` (``adatune.tuner`` and
``adatune.record`` keep AutoTVM's spellings). ``adatune.testing`` holds the conformance suites for a new tuner, cost
model, candidate kind or runner.
"""

from . import _moved, records, space, target, task, templates  # templates: the built-in ones register on import
from .dispatch import apply_history_best
from .measure import (
    LocalBuilder,
    LocalRunner,
    MeasureErrorNo,
    MeasureInput,
    MeasureResult,
    ReplayRunner,
    RPCRunner,
    measure_option,
)
from .records import best_records, load_from_file
from .records import pick_best as pick_best  # the deprecated name of best_records: it warns and forwards
from .task import get_config, template

__all__ = [
    "callback",
    "records",
    "space",
    "target",
    "task",
    "template",
    "get_config",
    "apply_history_best",
    "LocalBuilder",
    "LocalRunner",
    "ReplayRunner",
    "RPCRunner",
    "MeasureErrorNo",
    "MeasureInput",
    "MeasureResult",
    "measure_option",
    "load_from_file",
    "best_records",
    "tuners",
    "tuner",
    "record",
    "cost_models",
    "templates",
    "search",
]

__version__ = "0.1.0"

_LAZY = {
    "callback",
    "tuners",
    "cost_models",
    "meta_schedule",
    "trace",
    "dispatch",
    "tuner",  # AutoTVM's spelling of tuners
    "record",  # AutoTVM's spelling of records, with AutoTVM's pick_best(in_file, out_file)
    "testing",
    "search",
    "codegen",
}


_moved.install()  # old paths of moved modules and names keep working, deprecated


def __getattr__(name: str):  # heavy subpackages load on first use, keeping worker start-up light
    if name in _LAZY and not _moved.is_moved(f"{__name__}.{name}"):
        import importlib

        return importlib.import_module(f".{name}", __name__)
    return _moved.old_attribute(__name__, name, stacklevel=3)
