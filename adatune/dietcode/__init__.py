"""DietCode (Zheng et al., MLSys 2022): one tuning run for a dynamic-shape operator over a whole range of T.

- ``DynamicWorkload`` / ``bert_workloads``: GEMMs with a symbolic extent T and its range; a dense weight may be
  pre-packed in panels of ``weight_panel(target, dtype, N)`` columns (``pack_b``), once, as a model loads.
- ``MicroKernelSpace``: shape-generic micro-kernels from the hardware (x86 registers, caches, cores; CUDA
  threads, shared memory, registers); ``schedule_microkernel`` applies one with local padding.
- ``MicroKernelCostModel``: cost = f_MK(kernel) x f_occ(P/M) x f_pad, f_MK learnt jointly over all shapes from
  the kernel program's features (``ProgramFeatures``, TVM's extractor) or 12 hand-made ones (``HandFeatures``).
- ``propose_kernels``: evolutionary search on that model (or every kernel scored) for the next kernels to measure.
- ``compress_votes``: every T votes over all measured kernels; the smallest decision tree within a predicted-latency
  tolerance picks the kernels deployed.
- ``DietCodeTuner(...).tune()`` -> ``DietCodeResult`` (kernels + decision-tree dispatcher); ``.build()`` gives a
  ``DynamicKernel`` that runs any T, dispatching through C code compiled with the system compiler.
- ``BertEncoderLayer`` / ``BertEncoder``: a BERT encoder layer (a stack of them) with a symbolic sequence
  length on DietCode kernels, compiled once for the whole range.
"""

from ._bert import BertEncoder, BertEncoderLayer, bert_layer_reference, random_bert_weights
from ._cost import MicroKernelCostModel, f_occ, f_pad, fit_occupancy_k, num_tiles, sample_shapes, select_kernels
from ._kernel import DynamicKernel
from ._program import FEATURE_KINDS, HandFeatures, ProgramFeatures, unit_extent
from ._range_task import RANGE_PREFIX, RangeTask
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
    "BertEncoder",
    "BertEncoderLayer",
    "DietCodeResult",
    "DietCodeTuner",
    "DynamicKernel",
    "DynamicWorkload",
    "Measurement",
    "MicroKernel",
    "MicroKernelCostModel",
    "MicroKernelSpace",
    "MicroKernelTask",
    "bert_layer_reference",
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
    "random_bert_weights",
    "sample_shapes",
    "schedule_microkernel",
    "select_kernels",
    "validate_range",
    "weight_panel",
]
