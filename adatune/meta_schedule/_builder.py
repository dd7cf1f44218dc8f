"""FastBuilder: meta_schedule's builder with a warm, persistent pool of build processes.

The stock ``LocalBuilder`` starts new workers per ``build`` call, each importing ``tvm.s_tir.tensor_intrin``
inside the timed build, so small batches mostly import and, under load, time out. FastBuilder keeps its workers
(recycled after ``maximum_process_uses``) and imports the intrinsics only for ``tensorize=True``. Artifacts have
the stock format, so every meta_schedule runner loads them and ``RemoveBuildArtifact`` cleans them up.
"""

from __future__ import annotations

from tvm.ir.utils import derived_object
from tvm.s_tir.meta_schedule.builder import BuilderInput, BuilderResult, PyBuilder
from tvm.support.popen_pool import PopenPoolExecutor, StatusKind

from ._worker import build_artifact, warm_builder

__all__ = ["FastBuilder"]


def _build_packed(mod_target: tuple) -> str:
    return build_artifact(*mod_target)


@derived_object
class FastBuilder(PyBuilder):
    """A ``PyBuilder`` whose build processes stay warm; failures and timeouts come back as ``BuilderResult``
    errors (``error_msg`` starts with ``FastBuilder: COMPILE_HOST`` or ``FastBuilder: BUILD_TIMEOUT``).

    ``n_built`` and ``n_failed`` count candidates over the builder's life; ``n_calls`` counts ``build`` calls.
    """

    def __init__(
        self,
        max_workers: int | None = None,
        timeout_sec: float = 30.0,
        tensorize: bool = False,
        maximum_process_uses: int = 256,
    ):
        super().__init__()
        if max_workers is not None and (isinstance(max_workers, bool) or int(max_workers) < 1):
            raise ValueError(f"FastBuilder: max_workers must be a positive integer or None, got {max_workers!r}")
        if not timeout_sec > 0:
            raise ValueError(f"FastBuilder: timeout_sec must be positive, got {timeout_sec!r}")
        if int(maximum_process_uses) < 1:
            raise ValueError(f"FastBuilder: maximum_process_uses must be at least 1, got {maximum_process_uses!r}")
        self.timeout_sec = float(timeout_sec)
        self.tensorize = bool(tensorize)
        self.pool = PopenPoolExecutor(
            max_workers=max_workers,
            timeout=self.timeout_sec,
            initializer=warm_builder,
            initargs=(self.tensorize,),
            maximum_process_uses=int(maximum_process_uses),
        )
        self.n_calls = 0
        self.n_built = 0
        self.n_failed = 0

    def build(self, build_inputs: list[BuilderInput]) -> list[BuilderResult]:
        """Compile every input in the warm pool; one result per input, in order."""
        self.n_calls += 1
        jobs = [(bi.mod, bi.target) for bi in build_inputs]
        results: list[BuilderResult] = []
        for outcome in self.pool.map_with_error_catching(_build_packed, jobs):
            if outcome.status == StatusKind.COMPLETE:
                results.append(BuilderResult(str(outcome.value), None))
                self.n_built += 1
                continue
            self.n_failed += 1
            if outcome.status == StatusKind.TIMEOUT:
                msg = f"FastBuilder: BUILD_TIMEOUT: killed after {self.timeout_sec:g} s"
            else:
                msg = f"FastBuilder: COMPILE_HOST: {type(outcome.value).__name__}: {outcome.value}"
            results.append(BuilderResult(None, msg))
        return results

    def shutdown(self) -> None:
        """Stop the build processes now (they also stop when the builder is garbage-collected)."""
        self.pool.shutdown()
