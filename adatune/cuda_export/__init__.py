"""CUDA candidates for machines without TVM: export source + launch manifest here, measure them there with the
standalone ``cupy_runner.py`` (numpy + CuPy only), resume tuning here from the records it writes.

``python -m adatune.cuda_export export --workload dense-1024 --n 32 --out batch/ [--log tune.jsonl]``
"""

from ._export import export_batch, logged_keys, record_stub, select_candidates, tolerances, write_reference
from ._kernel import KernelLaunch, cuda_source, export_candidate, kernel_launch, parse_kernels

__all__ = [
    "KernelLaunch",
    "cuda_source",
    "export_batch",
    "export_candidate",
    "kernel_launch",
    "logged_keys",
    "parse_kernels",
    "record_stub",
    "select_candidates",
    "tolerances",
    "write_reference",
]
