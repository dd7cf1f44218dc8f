"""What runs inside the FastBuilder and AdaptiveRunner worker processes: persistent ``tvm.exec.popen_worker``
processes, so ``import tvm`` (and the tensor intrinsics) is paid once per worker, not per candidate. The functions
take and return plain data, so a crash or a hang costs only the worker.
"""

from __future__ import annotations

import os
import tempfile
from typing import Any

from ..codegen.tensor_intrinsics import import_tensor_intrinsics
from ..measure.evaluator import EvaluatorConfig, evaluate, time_fn_for
from ..target import size_tvm_thread_pool

__all__ = ["ARTIFACT_NAME", "build_artifact", "run_artifact", "warm_builder", "warm_runner"]

#: the file name meta_schedule's LocalBuilder gives its artifacts (a tar of object files, linked on load)
ARTIFACT_NAME = "tvm_tmp_mod.tar"


def warm_builder(tensorize: bool) -> None:
    """Pool initializer: import the compiler once per worker (and the tensor intrinsics when asked)."""
    import tvm  # noqa: F401
    from tvm.s_tir.transform import RemoveWeightLayoutRewriteBlock  # noqa: F401

    if tensorize:
        import_tensor_intrinsics()


def warm_runner() -> None:
    """Pool initializer: size TVM's thread pool to every usable core and import the runtime once per worker."""
    size_tvm_thread_pool()
    import tvm  # noqa: F401
    from tvm.s_tir.meta_schedule.runner.utils import alloc_argument_common  # noqa: F401


def build_artifact(mod: Any, target: Any) -> str:
    """Compile a scheduled module as meta_schedule's ``default_build`` does and export it as a tar of objects
    in a directory of its own (``RemoveBuildArtifact`` deletes the artifact's directory after the run)."""
    import tvm  # noqa: F401
    from tvm.s_tir.transform import RemoveWeightLayoutRewriteBlock
    from tvm.support.tar import tar

    mod = RemoveWeightLayoutRewriteBlock(skip_tensor_rewrite=True)(mod)
    lib = tvm.tirx.build(mod, target)
    path = os.path.join(tempfile.mkdtemp(prefix="adatune_ms_build."), ARTIFACT_NAME)
    lib.export_library(path, fcompile=tar)
    return path


def run_artifact(artifact_path: str, device_type: str, args_info: tuple, cfg: EvaluatorConfig) -> dict:
    """Load an artifact, fill its arguments with random data and time it with adatune's evaluator."""
    import tvm  # noqa: F401
    from tvm.s_tir.meta_schedule.runner.utils import alloc_argument_common

    module = tvm.runtime.load_module(artifact_path)
    device = tvm.runtime.device(device_type, 0)
    fill = tvm.get_global_func("tvm.contrib.random.random_fill_for_measure")
    args = alloc_argument_common(fill, device, list(args_info), 1)[0]
    outcome = evaluate(time_fn_for(module, device, args, cfg.enable_cpu_cache_flush), cfg)
    return {"costs": outcome.costs, "runs": outcome.runs, "cv": outcome.cv, "batch_runs": outcome.batch_runs}
