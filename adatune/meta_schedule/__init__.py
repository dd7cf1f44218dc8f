"""AdaTune's methods as drop-in plug-ins for TVM's own ``tvm.s_tir.meta_schedule`` tuning.

Pass them to ``ms.tune_tir``, ``ms.tune_tasks`` or Relax tuning in place of the stock components:

* ``RFEICostModel`` (``cost_model=``): random forest + forestci uncertainty + expected improvement;
* ``ContextualEvolutionarySearch`` (``strategy=``): evolutionary search whose random share is AdaTune's
  uncertainty-driven eps_t instead of a fixed 5%;
* ``AdaptiveRunner`` (``runner=``): stops timing a candidate once its throughput is stable;
* ``FastBuilder`` (``builder=``): a warm build pool instead of fresh processes per call.
"""

from ..codegen.tensor_intrinsics import import_tensor_intrinsics
from ._builder import FastBuilder
from ._cost_model import RFEICostModel, aggregate_store_features
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
]
