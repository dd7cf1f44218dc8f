"""Dynamic-shape GEMM workloads: one symbolic extent ``T`` (tokens) over a range, the rest fixed.

Three kinds cover a BERT layer: ``dense`` (``X[T, K] @ W[K, N]``, weights K-major as Relax's FoldConstant leaves
them), ``bmm_nt`` (``Q[B, T, D] @ K[B, T, D]^T``) and ``bmm_nn`` (``P[B, T, T] @ V[B, T, D]``). Every kernel takes
``T`` as its last, explicit argument: TVM binds a shape variable from a buffer shape only where it appears alone.
A dense weight may come pre-packed (``b_panel = W``: ``[N / W, K, W]`` panels, packed once as a model loads, ``W``
from ``weight_panel`` so every kernel of the space reads one layout).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import tvm
from tvm import te

from ._space import weight_panel

__all__ = ["GEMM_KINDS", "DynamicWorkload", "bert_workloads", "validate_range"]

GEMM_KINDS = ("dense", "bmm_nt", "bmm_nn")
DEFAULT_RANGE = (1, 128)


def validate_range(t_range: Any) -> tuple[int, int]:
    """``(lo, hi)`` as ints with ``1 <= lo <= hi``; anything else is a ValueError naming the problem."""
    if not isinstance(t_range, (tuple, list)) or len(t_range) != 2:
        raise ValueError(f"T range must be a pair (lo, hi), got {t_range!r}")
    lo, hi = t_range
    for v in (lo, hi):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
            raise ValueError(f"T range bounds must be integers, got {t_range!r}")
    if not 1 <= int(lo) <= int(hi):
        raise ValueError(f"T range must satisfy 1 <= lo <= hi, got {t_range!r}")
    return int(lo), int(hi)


@dataclass(frozen=True)
class DynamicWorkload:
    """A GEMM with one symbolic extent ``T`` in ``t_range``; ``dims``: ``(K, N)`` for ``dense``, ``(B, D)`` for
    ``bmm_nt`` (reduction over D) and ``bmm_nn`` (reduction over T)."""

    name: str
    kind: str
    dims: tuple[int, int]
    t_range: tuple[int, int] = DEFAULT_RANGE
    dtype: str = "float32"
    b_panel: int = 0  # dense only: B pre-packed as [N / b_panel, K, b_panel] (0: B is [K, N])

    def __post_init__(self) -> None:
        if self.kind not in GEMM_KINDS:
            raise ValueError(f"unknown GEMM kind {self.kind!r}; use one of {GEMM_KINDS}")
        if len(self.dims) != 2 or any(isinstance(d, bool) or not isinstance(d, int) or d < 1 for d in self.dims):
            raise ValueError(f"dims must be two positive ints, got {self.dims!r}")
        object.__setattr__(self, "t_range", validate_range(self.t_range))
        w = self.b_panel
        if isinstance(w, bool) or not isinstance(w, int) or w < 0:
            raise ValueError(f"b_panel must be a non-negative int, got {w!r}")
        if w and (self.kind != "dense" or self.dims[1] % w):
            raise ValueError(
                f"b_panel={w} packs a dense weight whose N is a multiple of it; {self.name} is {self.kind} "
                f"with dims {self.dims}"
            )

    # ------------------------------------------------------------------ shapes
    def gemm_extents(self, t: int) -> tuple[int, int, int, int]:
        """``(batch, rows, cols, reduction)`` of the GEMM at ``T = t``."""
        a, b = self.dims
        if self.kind == "dense":
            return 1, t, b, a
        if self.kind == "bmm_nt":
            return a, t, t, b
        return a, t, b, t

    def dynamic_axes(self) -> tuple[bool, bool, bool]:
        """Which of (rows, cols, reduction) scale with ``T``."""
        return {"dense": (True, False, False), "bmm_nt": (True, True, False), "bmm_nn": (True, False, True)}[self.kind]

    def shapes(self, t: int) -> list[tuple[int, ...]]:
        """Shapes of the two inputs and the output at ``T = t``."""
        a, b = self.dims
        if self.kind == "dense":
            weight = (b // self.b_panel, a, self.b_panel) if self.b_panel else (a, b)
            return [(t, a), weight, (t, b)]
        if self.kind == "bmm_nt":
            return [(a, t, b), (a, t, b), (a, t, t)]
        return [(a, t, t), (a, t, b), (a, t, b)]

    def flop(self, t: int) -> float:
        batch, m, n, k = self.gemm_extents(t)
        return 2.0 * batch * m * n * k

    def random_inputs(self, t: int, rng: np.random.Generator) -> list[np.ndarray]:
        """A and B at ``T = t`` in the layouts the kernels take (B packed when ``b_panel`` is set)."""
        return [rng.standard_normal(s, dtype=np.float32).astype(self.dtype) for s in self.shapes(t)[:2]]

    def pack_b(self, b: np.ndarray) -> np.ndarray:
        """A dense weight ``[K, N]`` in the layout the kernels take (itself when ``b_panel`` is 0)."""
        a_dim, n = self.dims
        if tuple(b.shape) != (a_dim, n):
            raise ValueError(f"{self.name} packs a [{a_dim}, {n}] weight, got {tuple(b.shape)}")
        if not self.b_panel:
            return np.ascontiguousarray(b, self.dtype)
        w = self.b_panel
        return np.ascontiguousarray(b.reshape(a_dim, n // w, w).transpose(1, 0, 2), self.dtype)

    def unpack_b(self, b: np.ndarray) -> np.ndarray:
        """``pack_b``'s inverse: the ``[K, N]`` weight a packed one stores."""
        if not self.b_panel:
            return b
        return b.transpose(1, 0, 2).reshape(self.dims)

    def reference(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """numpy's answer (OpenBLAS), the correctness reference and the vendor baseline."""
        if self.kind == "bmm_nt":
            return np.matmul(a, b.transpose(0, 2, 1))
        return np.matmul(a, self.unpack_b(b) if self.kind == "dense" else b)

    # ------------------------------------------------------------------ TIR
    def aligned_axis(self) -> int:
        """The GEMM axis (0 rows, 1 columns, 2 reduction) whose padding decides an aligned kernel version's ``align``:
        a bmm's second T axis (columns of ``bmm_nt``, the reduction of ``bmm_nn``), a dense GEMM's rows."""
        return {"dense": 0, "bmm_nt": 1, "bmm_nn": 2}[self.kind]

    def prim_func(self, packed: bool = True, align: int = 1, axes: Any = None) -> tvm.tirx.PrimFunc:
        """The computation with a symbolic ``T`` (int32), args ``(A, B, C, T)``, blocks A/B/C; B in the packed layout
        unless ``packed=False`` (``pack_b_layout``). ``align > 1``: the version for ``T`` a multiple of ``align``: the
        T axes in ``axes`` (0 rows, 1 columns, 2 reduction; default ``aligned_axis``) span ``T // align * align``, so a
        schedule leaves them unpadded; another ``T`` fails TVM's shape check instead of computing wrongly."""
        if isinstance(align, bool) or not isinstance(align, int) or align < 1:
            raise ValueError(f"align must be a positive int, got {align!r}")
        axes = frozenset({self.aligned_axis()} if axes is None else axes)
        dynamic = {ax for ax, dyn in enumerate(self.dynamic_axes()) if dyn}
        if not axes <= dynamic:
            raise ValueError(f"{self.name} can align only its T axes {sorted(dynamic)}, got {sorted(axes)}")
        func = self._einsum(align, axes)
        if not (packed and self.b_panel):
            return func
        sch = tvm.s_tir.Schedule(func)
        self.pack_b_layout(sch, sch.get_sblock("C"))
        return sch.mod["main"]

    def pack_b_layout(self, sch: tvm.s_tir.Schedule, reader: tvm.s_tir.SBlockRV) -> None:
        """Rewrite the parameter B, read by block ``reader``, into ``b_panel``-wide panels (no-op without)."""
        if self.b_panel:
            w = self.b_panel
            sch.transform_layout(reader, "B", lambda k, j: (j // w, k, j % w))

    def _einsum(self, align: int = 1, axes: frozenset[int] = frozenset()) -> tvm.tirx.PrimFunc:
        t = te.var("T", dtype="int32")
        aligned = tvm.tirx.floordiv(t, align) * align
        rows, cols, red = (aligned if align > 1 and ax in axes else t for ax in range(3))  # each T axis's extent
        a, b = self.dims
        dt = self.dtype
        if self.kind == "dense":
            x = te.placeholder((rows, a), dt, name="A")
            w = te.placeholder((a, b), dt, name="B")
            k = te.reduce_axis((0, a), name="k")
            y = te.compute((rows, b), lambda i, j: te.sum(x[i, k] * w[k, j], axis=k), name="C")
        elif self.kind == "bmm_nt":
            x = te.placeholder((a, rows, b), dt, name="A")
            w = te.placeholder((a, cols, b), dt, name="B")
            k = te.reduce_axis((0, b), name="k")
            y = te.compute((a, rows, cols), lambda n, i, j: te.sum(x[n, i, k] * w[n, j, k], axis=k), name="C")
        else:
            x = te.placeholder((a, rows, red), dt, name="A")
            w = te.placeholder((a, red, b), dt, name="B")
            k = te.reduce_axis((0, red), name="k")
            y = te.compute((a, rows, b), lambda n, i, j: te.sum(x[n, i, k] * w[n, k, j], axis=k), name="C")
        return te.create_prim_func([x, w, y, t])

    def to_json(self) -> list[Any]:
        out: list[Any] = [self.name, self.kind, list(self.dims), list(self.t_range), self.dtype]
        return out + [self.b_panel] if self.b_panel else out  # records of unpacked workloads read as before

    @classmethod
    def from_json(cls, data: Any) -> DynamicWorkload:
        try:
            name, kind, dims, t_range, dtype, *rest = data
            if len(rest) > 1:
                raise ValueError("too many fields")
            return cls(
                str(name),
                str(kind),
                (int(dims[0]), int(dims[1])),
                (int(t_range[0]), int(t_range[1])),
                str(dtype),
                int(rest[0]) if rest else 0,
            )
        except (TypeError, ValueError, IndexError) as err:
            raise ValueError(f"not a DynamicWorkload description: {data!r} ({err})") from err

    def __str__(self) -> str:
        packed = f", B in {self.b_panel}-column panels" if self.b_panel else ""
        return f"{self.name}[{self.kind} {self.dims[0]}x{self.dims[1]}, T in {self.t_range}{packed}]"


def bert_workloads(
    t_range: Any = DEFAULT_RANGE,
    hidden: int = 768,
    heads: int = 12,
    ffn: int = 3072,
    pack_for: Any = None,
) -> dict[str, DynamicWorkload]:
    """BERT-base's dynamic GEMMs with ``T`` tokens: the four dense layers and the two attention GEMMs. ``pack_for``:
    a target whose micro-kernels take the dense weights pre-packed (``weight_panel``); None keeps them ``[K, N]``."""
    lo, hi = validate_range(t_range)
    if hidden % heads:
        raise ValueError(f"hidden size {hidden} is not a multiple of {heads} heads")
    d = hidden // heads
    panel = (lambda n: weight_panel(pack_for, "float32", n)) if pack_for is not None else (lambda n: 0)
    wl = [
        DynamicWorkload("qkv", "dense", (hidden, 3 * hidden), (lo, hi), b_panel=panel(3 * hidden)),
        DynamicWorkload("attn_out", "dense", (hidden, hidden), (lo, hi), b_panel=panel(hidden)),
        DynamicWorkload("ffn1", "dense", (hidden, ffn), (lo, hi), b_panel=panel(ffn)),
        DynamicWorkload("ffn2", "dense", (ffn, hidden), (lo, hi), b_panel=panel(hidden)),
        DynamicWorkload("scores", "bmm_nt", (heads, d), (lo, hi)),
        DynamicWorkload("context", "bmm_nn", (heads, d), (lo, hi)),
    ]
    return {w.name: w for w in wl}
