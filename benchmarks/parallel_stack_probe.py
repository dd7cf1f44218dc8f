"""Parallel loops' buffers from TVM's workspace pool against the worker thread's stack (``adatune.stack_bounds``).

Inside a parallel loop TVM 0.27 allocates every buffer of 1 KiB or more (and every one of symbolic size) from its
workspace pool, an allocation and a free around each iteration: a DietCode kernel's per-tile copies of A and B, a
template's padded tiles. ``stack_bounds.PARALLEL_STACK_BYTES`` (0 for the pool) puts those up to its size on the
stack instead. The cases, the checks and the timing in turns are ``benchmarks.accumulator_scope_probe``'s, every
build through adatune's TIR pipeline (``vector_math.compile_module``), where the pass runs. Run alone::

    python -m benchmarks.parallel_stack_probe --out benchmarks/results/parallel_stack_probe_zen1
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from adatune import stack_bounds, vector_math

from .accumulator_scope_probe import arguments, dietcode_cases, probe, template_cases, write
from .noise_gate import gated_run

VARIANTS = ("pool", "stack")


@contextlib.contextmanager
def parallel_stack(variant: str) -> Iterator[None]:
    """Builds inside use the pool (``variant == "pool"``) or the shipped stack limit for parallel bodies."""
    saved = stack_bounds.PARALLEL_STACK_BYTES
    stack_bounds.PARALLEL_STACK_BYTES = 0 if variant == "pool" else saved
    try:
        yield
    finally:
        stack_bounds.PARALLEL_STACK_BYTES = saved


def main(argv: list[str] | None = None) -> int:
    args = arguments("benchmarks.parallel_stack_probe", __doc__, argv)
    cases = [*dietcode_cases(args.kernels, args.t), *template_cases(args.logs, args.tasks)]
    rows, meta, gate = gated_run(
        "benchmarks.parallel_stack_probe",
        argv,
        lambda: probe(
            cases, args.rounds, parallel_stack, VARIANTS, lambda mod, target: vector_math.compile_module(mod, target)[0]
        ),
    )
    title = "Parallel loops' buffers from the workspace pool against the stack, in turns"
    write(args.out, rows, meta, gate, title, args.rounds, VARIANTS)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
