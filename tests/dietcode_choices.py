"""Hand-made DietCode choices for tests that check programs built on them, not the tuner's picks."""

from __future__ import annotations

import tvm

from adatune.dietcode import DynamicWorkload, MicroKernelSpace
from adatune.dietcode._bert import Choice
from adatune.dietcode._task import static_k
from adatune.dispatch import ShapeDispatcher


def two_kernel_choices(
    workloads: dict[str, DynamicWorkload], target: tvm.target.Target, t_range: tuple[int, int], split: int = 12
) -> dict[str, Choice]:
    """Per GEMM the space's smallest and largest micro-kernels, the small one for T <= ``split``: two kernels
    and a real dispatcher, so both padding regimes and a dispatch decision are exercised."""
    choices = {}
    ts = list(range(t_range[0], t_range[1] + 1))
    for name, wl in workloads.items():
        space = MicroKernelSpace(target, "float32", static_k(wl))
        small = min(space.kernels, key=lambda k: (k.mt * k.nt, k.kt))
        large = max(space.kernels, key=lambda k: (k.mt * k.nt, k.kt))
        disp = ShapeDispatcher.fit(ts, [small.key if t <= split else large.key for t in ts], t_range)
        by_key = {small.key: small, large.key: large}
        choices[name] = ([by_key[label] for label in disp.labels], disp)
    return choices
