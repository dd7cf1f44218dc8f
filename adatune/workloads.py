"""Built-in workloads: named operator shapes that pick the right template for a target.

=============================  ============================================================
name                           shape
=============================  ============================================================
``dense-1024``                 ``[1024,1024] @ [1024,1024]``
``dense-bert-qkv/ffn1/ffn2``   BERT-base projections at 128 tokens (768->768, 768->3072, 3072->768)
``bmm-bert-nn``                ``[12,128,64] @ [12,64,128]`` (attention scores, K pre-transposed)
``bmm-bert-nt``                ``[12,128,64] @ [12,128,64]^T`` (``Q K^T``)
``bmm-bert-av``                ``[12,128,128] @ [12,128,64]`` (attention times V)
``conv2d-resnet18-L1..L12``    ResNet-18 conv layers at batch 1 (table below)
``conv2d-resnet18-L6-small``   L6 with the restricted x86 space (``space="small"``, ~2k configs)
=============================  ============================================================

ResNet-18 layers use the numbering of the TVM (OSDI'18) and AutoTVM papers' C1-C12 table, which the
AdaTune paper calls L1-L12 (H=W input size, CI -> CO, kernel, stride, padding):

====  =====  ==========  ======  ======  ===
 L     H/W    CI -> CO    kernel  stride  pad
====  =====  ==========  ======  ======  ===
 L1    224    3 -> 64     7x7     2       3
 L2    56     64 -> 64    3x3     1       1
 L3    56     64 -> 64    1x1     1       0
 L4    56     64 -> 128   3x3     2       1
 L5    56     64 -> 128   1x1     2       0
 L6    28     128 -> 128  3x3     1       1
 L7    28     128 -> 256  3x3     2       1
 L8    28     128 -> 256  1x1     2       0
 L9    14     256 -> 256  3x3     1       1
 L10   14     256 -> 512  3x3     2       1
 L11   14     256 -> 512  1x1     2       0
 L12   7      512 -> 512  3x3     1       1
====  =====  ==========  ======  ======  ===

These are all of torchvision ResNet-18's distinct conv shapes, plus L3, which the papers list but
torchvision's ResNet-18 does not contain (its first stage has no 1x1 shortcut); it is kept so that
"L6" means the same layer here as in the papers.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from . import target as _target
from . import templates as _templates  # noqa: F401 - registers the templates
from .task import Task, create

__all__ = ["Workload", "WORKLOADS", "get", "list_workloads", "torch_reference"]

_OPS = ("dense", "batch_matmul", "conv2d_nchw")


@dataclass(frozen=True)
class Workload:
    """An operator shape: ``op`` plus template arguments; ``x86_args`` are appended on CPUs only."""

    name: str
    op: str
    args: tuple
    description: str
    x86_args: tuple = ()
    cuda: bool = True

    def template_name(self, target: _target.TargetLike | None = None) -> str:
        return f"{self.op}.{'cuda' if _is_cuda(target) else 'x86'}"

    def task_args(self, target: _target.TargetLike | None = None) -> tuple:
        return self.args if _is_cuda(target) else self.args + self.x86_args

    def create_task(self, target: _target.TargetLike | None = None) -> Task:
        """The tuning task for ``target`` (default: this CPU): ``.cuda`` template on CUDA, else ``.x86``."""
        tgt = _target.create(target) if target is not None else _target.host()
        if _is_cuda(tgt) and not self.cuda:
            raise ValueError(f"workload {self.name!r} is defined for CPUs only")
        return create(self.template_name(tgt), self.task_args(tgt), tgt)

    @property
    def flop(self) -> float:
        if self.op == "dense":
            n, l, m = self.args[:3]
            return 2.0 * n * l * m
        if self.op == "batch_matmul":
            b, m, n, k = self.args[:4]
            return 2.0 * b * m * n * k
        from .templates.conv2d import conv2d_flop

        return conv2d_flop(*self.args[:9])


def _is_cuda(target: _target.TargetLike | None) -> bool:
    return target is not None and _target.create(target).kind.name == "cuda"


# H/W, CI, CO, kernel, stride, pad: the papers' C1-C12 / L1-L12
_RESNET18 = [(224, 3, 64, 7, 2, 3), (56, 64, 64, 3, 1, 1), (56, 64, 64, 1, 1, 0), (56, 64, 128, 3, 2, 1),
             (56, 64, 128, 1, 2, 0), (28, 128, 128, 3, 1, 1), (28, 128, 256, 3, 2, 1),
             (28, 128, 256, 1, 2, 0), (14, 256, 256, 3, 1, 1), (14, 256, 512, 3, 2, 1),
             (14, 256, 512, 1, 2, 0), (7, 512, 512, 3, 1, 1)]


def _build() -> dict[str, Workload]:
    out: list[Workload] = [
        Workload("dense-1024", "dense", (1024, 1024, 1024, "float32"), "dense 1024x1024 @ 1024x1024"),
        Workload("dense-bert-qkv", "dense", (128, 768, 768, "float32"), "BERT-base Q/K/V projection, 128 tokens"),
        Workload("dense-bert-ffn1", "dense", (128, 768, 3072, "float32"), "BERT-base FFN up-projection"),
        Workload("dense-bert-ffn2", "dense", (128, 3072, 768, "float32"), "BERT-base FFN down-projection"),
        Workload("bmm-bert-nn", "batch_matmul", (12, 128, 128, 64, "NN", "float32"),
                 "BERT attention scores [12,128,64] @ [12,64,128]"),
        Workload("bmm-bert-nt", "batch_matmul", (12, 128, 128, 64, "NT", "float32"),
                 "BERT attention scores Q @ K^T, [12,128,64] @ [12,128,64]^T"),
        Workload("bmm-bert-av", "batch_matmul", (12, 128, 64, 128, "NN", "float32"),
                 "BERT attention probabilities @ V, [12,128,128] @ [12,128,64]"),
    ]
    for i, (hw, ci, co, k, s, p) in enumerate(_RESNET18, start=1):
        out.append(Workload(f"conv2d-resnet18-L{i}", "conv2d_nchw", (1, ci, hw, hw, co, k, k, s, p, "float32"),
                            f"ResNet-18 L{i}: {ci}x{hw}x{hw} -> {co}, {k}x{k} stride {s} pad {p}"))
    l6 = out[-7]
    out.append(Workload("conv2d-resnet18-L6-small", "conv2d_nchw", l6.args,
                        "ResNet-18 L6 with the restricted x86 space (~2k configs) for exhaustive sweeps",
                        x86_args=("small",), cuda=False))
    return {w.name: w for w in out}


WORKLOADS: dict[str, Workload] = _build()


def get(name: str | Workload) -> Workload:
    if isinstance(name, Workload):
        return name
    try:
        return WORKLOADS[name]
    except KeyError:
        raise KeyError(f"unknown workload {name!r}; known: {', '.join(WORKLOADS)}") from None


def list_workloads() -> list[str]:
    """Names of the built-in workloads, in a stable order."""
    return list(WORKLOADS)


def torch_reference(workload: str | Workload, seed: int = 0) -> Callable[[], Any]:
    """A zero-argument callable running the same operator in PyTorch on random inputs (created once),
    for reference throughput. Thread count is left to the caller (``torch.set_num_threads``)."""
    import torch
    import torch.nn.functional as F

    w = get(workload)
    gen = torch.Generator().manual_seed(seed)
    rand = lambda *shape: torch.rand(*shape, generator=gen) * 2 - 1  # noqa: E731
    if w.op == "dense":
        n, l, m = w.args[:3]
        a, b = rand(n, l), rand(l, m)
        return lambda: torch.matmul(a, b)
    if w.op == "batch_matmul":
        bsz, m, n, k, layout = w.args[:5]
        a = rand(bsz, m, k)
        if layout == "NT":
            b = rand(bsz, n, k)
            return lambda: torch.matmul(a, b.transpose(1, 2))
        b = rand(bsz, k, n)
        return lambda: torch.matmul(a, b)
    n, ci, h, wd, co, kh, kw, stride, pad = w.args[:9]
    x, wt = rand(n, ci, h, wd), rand(co, ci, kh, kw)

    def conv() -> Any:
        with torch.no_grad():
            return F.conv2d(x, wt, stride=stride, padding=pad)

    return conv
