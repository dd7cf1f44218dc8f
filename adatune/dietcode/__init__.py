"""DietCode (Zheng et al., MLSys 2022): one tuning run for a dynamic-shape operator over a whole range of T.

- ``DynamicWorkload`` / ``bert_workloads``: GEMMs with a symbolic extent T and its range (a dense weight may be
  pre-packed in ``weight_panel`` columns once, as a model loads).
- ``MicroKernelSpace``: shape-generic micro-kernels from the hardware; ``schedule_microkernel`` applies one.
- ``MicroKernelCostModel``: cost = f_MK(kernel) x f_occ(P/M) x f_pad, f_MK learnt jointly over all shapes;
  ``propose_kernels`` searches it for the next kernels to measure.
- ``compress_votes``: every T votes over the measured kernels; the smallest decision tree within a latency
  tolerance picks those deployed. ``ShapeDispatcher`` is that tree, emitted as Python, C or Relax ``If``s.
- ``DietCodeTuner``, whose ``result()`` (``DietCodeResult``) builds a ``DynamicKernel`` that runs any T;
  ``build_relax`` compiles a Relax graph once for its ranges (what ``adatune.models.build_dynamic`` wraps).
"""

from ._cost import MicroKernelCostModel, f_occ, f_pad, fit_occupancy_k, num_tiles, sample_shapes, select_kernels
from ._dispatch import CompiledDispatcher, ShapeDispatcher, check_extent
from ._kernel import DynamicKernel
from ._program import FEATURE_KINDS, HandFeatures, ProgramFeatures, unit_extent
from ._range_task import RANGE_PREFIX, RangeTask
from ._relax_build import RelaxBuild, build_relax, gemm_workloads
from ._schedule import (
    aligned_name,
    aligned_tile,
    aligned_versions,
    alignment,
    microkernel_func,
    schedule_microkernel,
    serving_name,
    versioned_funcs,
)
from ._search import SEARCHES, propose_kernels
from ._select import Compression, compress_votes
from ._space import SM80_LIMITS, MicroKernel, MicroKernelSpace, weight_panel
from ._task import PREFIX, MicroKernelTask
from ._tune import DISPATCH_COSTS, DietCodeResult, DietCodeTuner, Measurement
from ._workloads import GEMM_KINDS, DynamicWorkload, bert_workloads, validate_range

__all__ = [
    "CompiledDispatcher",
    "ShapeDispatcher",
    "check_extent",
    "RelaxBuild",
    "build_relax",
    "gemm_workloads",
    "DISPATCH_COSTS",
    "FEATURE_KINDS",
    "GEMM_KINDS",
    "SEARCHES",
    "Compression",
    "HandFeatures",
    "ProgramFeatures",
    "compress_votes",
    "propose_kernels",
    "unit_extent",
    "PREFIX",
    "SM80_LIMITS",
    "DietCodeResult",
    "DietCodeTuner",
    "DynamicKernel",
    "DynamicWorkload",
    "Measurement",
    "MicroKernel",
    "MicroKernelCostModel",
    "MicroKernelSpace",
    "MicroKernelTask",
    "bert_workloads",
    "f_occ",
    "f_pad",
    "fit_occupancy_k",
    "RANGE_PREFIX",
    "RangeTask",
    "microkernel_func",
    "aligned_name",
    "aligned_tile",
    "aligned_versions",
    "alignment",
    "serving_name",
    "versioned_funcs",
    "num_tiles",
    "sample_shapes",
    "schedule_microkernel",
    "select_kernels",
    "validate_range",
    "weight_panel",
]

#: names removed with the hand-built dynamic BERT, and what replaces them
_REMOVED = dict.fromkeys(
    ("BertEncoder", "BertEncoderLayer", "bert_layer_reference", "random_bert_weights"),
    "a BERT (any PyTorch module) with a symbolic sequence length compiles through "
    "adatune.models.from_torch(module, inputs, dynamic=...), tune_dynamic and build_dynamic",
)


def __getattr__(name: str) -> object:
    if name in _REMOVED:
        raise AttributeError(f"adatune.dietcode.{name} was removed: {_REMOVED[name]}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
