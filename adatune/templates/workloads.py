"""Built-in workloads: named operator shapes that pick the right template for a target (``adatune workloads`` lists
them): ``dense-1024``, BERT-base's projections at 128 tokens (``dense-bert-qkv/ffn1/ffn2``) and attention batch
matmuls (``bmm-bert-nn/nt/av``), and ResNet-18's conv layers at batch 1 (``conv2d-resnet18-L1..L12``; L6 also in
the restricted x86 space as ``conv2d-resnet18-L6-small``).

The ResNet-18 layers are numbered as in the TVM (OSDI'18) and AutoTVM papers' C1-C12 table, which the AdaTune paper
calls L1-L12 (``_RESNET18``). L3 is not in torchvision's ResNet-18 (its first stage has no 1x1 shortcut) but is
kept so that "L6" means the same layer here as in the papers.

Any other shape is a *spec*, ``op:key=value,...``, accepted wherever a workload name is (``get``,
``adatune tune --workload``)::

    dense:M=128,N=3072,K=768                          # [M,K] @ [K,N]
    batch_matmul:B=12,M=128,N=128,K=64,layout=NT      # [B,M,K] @ [B,K,N] (NN) or [B,N,K]^T (NT)
    conv2d:N=1,CI=64,H=56,W=56,CO=64,KH=3,KW=3,stride=1,pad=1

``dtype`` defaults to float32 and ``layout`` to NN; ``space=autotvm`` asks for AutoTVM's unpruned space instead of
the hardware-pruned default, and conv2d also takes ``space=small`` (the restricted x86 space).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .. import target as _target
from ..task import TuningTask, create

__all__ = [
    "WORKLOADS",
    "SPEC_FORMATS",
    "UnknownWorkloadError",
    "Workload",
    "get",
    "list_workloads",
    "parse_spec",
    "torch_reference",
]

_OPS = ("dense", "batch_matmul", "conv2d_nchw")


@dataclass(frozen=True)
class Workload:
    """An operator shape: ``op`` plus template arguments; ``space`` (``"full"``, ``"autotvm"``, or the x86
    conv2d's ``"small"``) is appended to them when it is not the default."""

    name: str
    op: str
    args: tuple
    description: str
    space: str = "full"
    cuda: bool = True

    def template_name(self, target: _target.TargetLike | None = None) -> str:
        return f"{self.op}.{'cuda' if _is_cuda(target) else 'x86'}"

    def task_args(self, target: _target.TargetLike | None = None) -> tuple:
        return self.args + ((self.space,) if self.space != "full" else ())

    def create_task(self, target: _target.TargetLike | None = None) -> TuningTask:
        """The tuning task for ``target`` (default: this CPU): ``.cuda`` template on CUDA, else ``.x86``."""
        tgt = _target.create(target) if target is not None else _target.host()
        if _is_cuda(tgt) and not self.cuda:
            raise ValueError(f"workload {self.name!r} is defined for CPUs only")
        return create(self.template_name(tgt), self.task_args(tgt), tgt)

    @property
    def flop(self) -> float:
        if self.op == "dense":
            rows, inner, cols = self.args[:3]
            return 2.0 * rows * inner * cols
        if self.op == "batch_matmul":
            b, m, n, k = self.args[:4]
            return 2.0 * b * m * n * k
        from .conv2d import conv2d_flop

        return conv2d_flop(*self.args[:9])


def _is_cuda(target: _target.TargetLike | None) -> bool:
    return target is not None and _target.create(target).kind.name == "cuda"


# H/W, CI, CO, kernel, stride, pad: the papers' C1-C12 / L1-L12
_RESNET18 = [
    (224, 3, 64, 7, 2, 3),
    (56, 64, 64, 3, 1, 1),
    (56, 64, 64, 1, 1, 0),
    (56, 64, 128, 3, 2, 1),
    (56, 64, 128, 1, 2, 0),
    (28, 128, 128, 3, 1, 1),
    (28, 128, 256, 3, 2, 1),
    (28, 128, 256, 1, 2, 0),
    (14, 256, 256, 3, 1, 1),
    (14, 256, 512, 3, 2, 1),
    (14, 256, 512, 1, 2, 0),
    (7, 512, 512, 3, 1, 1),
]


def _build() -> dict[str, Workload]:
    out: list[Workload] = [
        Workload("dense-1024", "dense", (1024, 1024, 1024, "float32"), "dense 1024x1024 @ 1024x1024"),
        Workload("dense-bert-qkv", "dense", (128, 768, 768, "float32"), "BERT-base Q/K/V projection, 128 tokens"),
        Workload("dense-bert-ffn1", "dense", (128, 768, 3072, "float32"), "BERT-base FFN up-projection"),
        Workload("dense-bert-ffn2", "dense", (128, 3072, 768, "float32"), "BERT-base FFN down-projection"),
        Workload(
            "bmm-bert-nn",
            "batch_matmul",
            (12, 128, 128, 64, "NN", "float32"),
            "BERT attention scores [12,128,64] @ [12,64,128]",
        ),
        Workload(
            "bmm-bert-nt",
            "batch_matmul",
            (12, 128, 128, 64, "NT", "float32"),
            "BERT attention scores Q @ K^T, [12,128,64] @ [12,128,64]^T",
        ),
        Workload(
            "bmm-bert-av",
            "batch_matmul",
            (12, 128, 64, 128, "NN", "float32"),
            "BERT attention probabilities @ V, [12,128,128] @ [12,128,64]",
        ),
    ]
    for i, (hw, ci, co, k, s, p) in enumerate(_RESNET18, start=1):
        out.append(
            Workload(
                f"conv2d-resnet18-L{i}",
                "conv2d_nchw",
                (1, ci, hw, hw, co, k, k, s, p, "float32"),
                f"ResNet-18 L{i}: {ci}x{hw}x{hw} -> {co}, {k}x{k} stride {s} pad {p}",
            )
        )
    l6 = out[-7]
    out.append(
        Workload(
            "conv2d-resnet18-L6-small",
            "conv2d_nchw",
            l6.args,
            "ResNet-18 L6 with the restricted x86 space (~2k configs) for exhaustive sweeps",
            space="small",
            cuda=False,
        )
    )
    return {w.name: w for w in out}


WORKLOADS: dict[str, Workload] = _build()


class UnknownWorkloadError(KeyError):
    """No built-in workload has this name (a KeyError whose message prints without quotes)."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


def get(name: str | Workload) -> Workload:
    """A built-in workload by name, or the workload a spec such as ``dense:M=128,N=3072,K=768`` describes.
    UnknownWorkloadError (a KeyError) for an unknown name, ValueError for a malformed spec."""
    if isinstance(name, Workload):
        return name
    if ":" in name:
        return parse_spec(name)
    try:
        return WORKLOADS[name]
    except KeyError:
        raise UnknownWorkloadError(
            f"unknown workload {name!r}: use a built-in name ({', '.join(WORKLOADS)}) "
            f"or a spec such as {SPEC_FORMATS['dense']}"
        ) from None


# op -> (template op, required int parameters in the spec's order; _SPEC_ARGS below orders the template's)
_SPEC_PARAMS: dict[str, tuple[str, tuple[str, ...]]] = {
    "dense": ("dense", ("M", "N", "K")),
    "batch_matmul": ("batch_matmul", ("B", "M", "N", "K")),
    "conv2d": ("conv2d_nchw", ("N", "CI", "H", "W", "CO", "KH", "KW", "stride", "pad")),
}
_SPEC_ALIASES = {"conv2d_nchw": "conv2d", "bmm": "batch_matmul"}
_SPEC_TEXT = {
    "dtype": ("float32", ("float16", "float32", "float64")),
    "layout": ("NN", ("NN", "NT")),
    "space": ("full", ("full", "autotvm", "small")),
}
_SPEC_OPTIONAL = {
    "dense": ("dtype", "space"),
    "batch_matmul": ("layout", "dtype", "space"),
    "conv2d": ("dtype", "space"),
}
SPEC_FORMATS = {
    "dense": "dense:M=128,N=3072,K=768",
    "batch_matmul": "batch_matmul:B=12,M=128,N=128,K=64,layout=NT",
    "conv2d": "conv2d:N=1,CI=64,H=56,W=56,CO=64,KH=3,KW=3,stride=1,pad=1",
}


def parse_spec(spec: str) -> Workload:
    """The workload an ``op:key=value,...`` spec describes; ValueError naming what is wrong (unknown op or
    key, a missing or repeated key, a value that is not a positive integer, an output that would be empty)."""
    head, _, body = spec.strip().partition(":")
    op = _SPEC_ALIASES.get(head.strip(), head.strip())
    if op not in _SPEC_PARAMS:
        raise ValueError(
            f"workload spec {spec!r}: unknown operator {head.strip()!r}; "
            f"use {', '.join(_SPEC_PARAMS)} (e.g. {SPEC_FORMATS['dense']})"
        )
    template_op, required = _SPEC_PARAMS[op]
    optional = _SPEC_OPTIONAL[op]
    values: dict[str, str] = {}
    for item in body.split(","):
        key, eq, value = (part.strip() for part in item.partition("="))
        if not eq or not key or not value:
            raise ValueError(f"workload spec {spec!r}: {item.strip()!r} is not key=value (format: {SPEC_FORMATS[op]})")
        if key not in required and key not in optional:
            raise ValueError(
                f"workload spec {spec!r}: unknown key {key!r} for {op}; keys: {', '.join(required + optional)}"
            )
        if key in values:
            raise ValueError(f"workload spec {spec!r}: {key} is given twice")
        values[key] = value
    missing = [k for k in required if k not in values]
    if missing:
        raise ValueError(f"workload spec {spec!r}: missing {', '.join(missing)} (format: {SPEC_FORMATS[op]})")
    ints = {k: _spec_int(spec, k, values[k], 0 if k == "pad" else 1) for k in required}
    text = {k: _spec_text(spec, k, values.get(k)) for k in optional}
    if text["space"] == "small" and op != "conv2d":
        raise ValueError(f"workload spec {spec!r}: space=small exists for conv2d only; use full or autotvm")
    if op == "dense":
        args: tuple = (ints["M"], ints["K"], ints["N"], text["dtype"])
        shape = f"[{ints['M']},{ints['K']}] @ [{ints['K']},{ints['N']}]"
    elif op == "batch_matmul":
        args = (ints["B"], ints["M"], ints["N"], ints["K"], text["layout"], text["dtype"])
        b_shape = (ints["B"], ints["N"], ints["K"]) if text["layout"] == "NT" else (ints["B"], ints["K"], ints["N"])
        shape = f"[{ints['B']},{ints['M']},{ints['K']}] @ [{','.join(map(str, b_shape))}]" + (
            "^T" if text["layout"] == "NT" else ""
        )
    else:
        from .conv2d import output_size

        args = tuple(ints[k] for k in required) + (text["dtype"],)
        oh = output_size(ints["H"], ints["KH"], ints["stride"], ints["pad"])
        ow = output_size(ints["W"], ints["KW"], ints["stride"], ints["pad"])
        if oh < 1 or ow < 1:
            raise ValueError(
                f"workload spec {spec!r}: a {ints['KH']}x{ints['KW']} kernel does not fit the "
                f"{ints['H']}x{ints['W']} input padded by {ints['pad']}"
            )
        shape = (
            f"{ints['CI']}x{ints['H']}x{ints['W']} -> {ints['CO']}x{oh}x{ow}, {ints['KH']}x{ints['KW']} "
            f"stride {ints['stride']} pad {ints['pad']}"
        )
    canonical = f"{op}:" + ",".join(f"{k}={ints[k]}" for k in required)
    canonical += "".join(f",{k}={text[k]}" for k in optional if text[k] != _SPEC_TEXT[k][0])
    return Workload(
        canonical,
        template_op,
        args,
        f"{op} {shape} ({text['dtype']})" + (f", {text['space']} space" if text["space"] != "full" else ""),
        space=text["space"],
        cuda=text["space"] != "small",
    )


def _spec_int(spec: str, key: str, value: str, minimum: int) -> int:
    try:
        number = int(value)
    except ValueError:
        number = minimum - 1
    if number < minimum:
        kind = "a non-negative" if minimum == 0 else "a positive"
        raise ValueError(f"workload spec {spec!r}: {key}={value} must be {kind} integer")
    return number


def _spec_text(spec: str, key: str, value: str | None) -> str:
    default, choices = _SPEC_TEXT[key]
    if value is None:
        return default
    if value not in choices:
        raise ValueError(f"workload spec {spec!r}: {key}={value} must be one of {', '.join(choices)}")
    return value


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
        rows, inner, cols = w.args[:3]
        a, b = rand(rows, inner), rand(inner, cols)
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
