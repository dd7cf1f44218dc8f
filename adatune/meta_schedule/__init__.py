"""AdaTune's methods as drop-in plug-ins for TVM's own ``tvm.s_tir.meta_schedule`` tuning (``ms.tune_tir``,
``ms.tune_tasks``, Relax tuning): ``RFEICostModel`` (``cost_model=``), ``ContextualEvolutionarySearch``
(``strategy=``, random share AdaTune's eps_t instead of a fixed 5%), ``AdaptiveRunner`` (``runner=``, stops timing
once throughput is stable) and ``FastBuilder`` (``builder=``, a warm build pool). ``export_database`` writes an
adatune log's best records as MetaSchedule tuning records, for ``relax.transform.MetaScheduleApplyDatabase``;
``import_database`` reads a MetaSchedule database as adatune history.
"""

from ..codegen.tensor_intrinsics import import_tensor_intrinsics
from ._builder import FastBuilder
from ._cost_model import RFEICostModel, aggregate_store_features
from ._database import export_database, import_database, workload_module
from ._runner import AdaptiveRunner, error_kind
from ._search import ContextualEvolutionarySearch

# every TuneContext that tune_tir makes imports the tensor intrinsics first: do it now, through the fast import
import_tensor_intrinsics()

__all__ = [
    "AdaptiveRunner",
    "ContextualEvolutionarySearch",
    "FastBuilder",
    "RFEICostModel",
    "aggregate_store_features",
    "error_kind",
    "export_database",
    "import_database",
    "workload_module",
]
