"""A BERT encoder layer with a symbolic sequence length T, compiled once on DietCode kernels.

The six GEMMs (QKV, attention output, FFN up/down, attention scores and context) run the micro-kernels a
DietCode run chose, dispatched per T by their compiled C decision trees; bias, head split/merge, softmax,
GELU and residual layer norms are TE functions of the same symbolic T. Everything is one IRModule and
one ``tvm.compile``: any T runs without recompiling. Post-LN BERT: ``h = LN(x + Attn(x))``,
``out = LN(h + FFN(h))``.
"""

from __future__ import annotations

import math
import tempfile
from collections.abc import Mapping, Sequence

import numpy as np
import tvm
from scipy.special import erf
from tvm import te

from .. import target as _target
from .. import vector_math
from ..dispatch._dietcode import CompiledDispatcher, ShapeDispatcher, check_extent
from ._schedule import aligned_versions, serving_name, versioned_funcs
from ._space import MicroKernel, device_of
from ._workloads import DynamicWorkload, bert_workloads

__all__ = ["BertEncoder", "BertEncoderLayer", "bert_layer_reference", "random_bert_weights"]

GEMMS = ("qkv", "attn_out", "ffn1", "ffn2", "scores", "context")
_WEIGHT_OF = {"w_qkv": "qkv", "w_o": "attn_out", "w_1": "ffn1", "w_2": "ffn2"}  # weight -> the GEMM it feeds
Choice = tuple[list[MicroKernel], ShapeDispatcher]


def random_bert_weights(rng: np.random.Generator, hidden: int = 768, ffn: int = 3072) -> dict[str, np.ndarray]:
    """Weights with BERT's shapes (K-major GEMM weights), scaled like a trained layer's."""

    def w(*shape: int) -> np.ndarray:
        return (rng.standard_normal(shape) * 0.02).astype(np.float32)

    return {
        "w_qkv": w(hidden, 3 * hidden),
        "b_qkv": w(3 * hidden),
        "w_o": w(hidden, hidden),
        "b_o": w(hidden),
        "ln1_g": (1 + w(hidden)).astype(np.float32),
        "ln1_b": w(hidden),
        "w_1": w(hidden, ffn),
        "b_1": w(ffn),
        "w_2": w(ffn, hidden),
        "b_2": w(hidden),
        "ln2_g": (1 + w(hidden)).astype(np.float32),
        "ln2_b": w(hidden),
    }


def _layer_norm_np(x: np.ndarray, g: np.ndarray, b: np.ndarray, eps: float = 1e-12) -> np.ndarray:
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * g + b


def bert_layer_reference(x: np.ndarray, w: Mapping[str, np.ndarray], heads: int = 12) -> np.ndarray:
    """The layer in float64 numpy (what the compiled layer must reproduce)."""
    t, hidden = x.shape
    d = hidden // heads
    x64 = x.astype(np.float64)
    qkv = x64 @ w["w_qkv"] + w["b_qkv"]
    q, k, v = (qkv[:, i * hidden : (i + 1) * hidden].reshape(t, heads, d).transpose(1, 0, 2) for i in range(3))
    s = q @ k.transpose(0, 2, 1) / math.sqrt(d)
    p = np.exp(s - s.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    ctx = (p @ v).transpose(1, 0, 2).reshape(t, hidden)
    h = _layer_norm_np(ctx @ w["w_o"] + w["b_o"] + x64, w["ln1_g"], w["ln1_b"])
    f = h @ w["w_1"] + w["b_1"]
    f = 0.5 * f * (1 + erf(f / math.sqrt(2)))
    return _layer_norm_np(f @ w["w_2"] + w["b_2"] + h, w["ln2_g"], w["ln2_b"]).astype(np.float32)


def _glue_funcs(hidden: int, heads: int, ffn: int) -> dict[str, tvm.tirx.PrimFunc]:
    """The non-GEMM operators as TE functions of a symbolic T (T passed explicitly, as for the GEMMs)."""
    d = hidden // heads
    f32 = "float32"
    out: dict[str, tvm.tirx.PrimFunc] = {}

    t = te.var("T", dtype="int32")
    raw = te.placeholder((t, 3 * hidden), f32, name="raw")
    bias = te.placeholder((3 * hidden,), f32, name="bias")

    def head(c: int, name: str) -> te.Tensor:
        col = lambda h, j: c * hidden + h * d + j  # noqa: E731
        return te.compute((heads, t, d), lambda h, i, j: raw[i, col(h, j)] + bias[col(h, j)], name=name)

    q, k, v = head(0, "q"), head(1, "k"), head(2, "v")
    out["split_heads"] = te.create_prim_func([raw, bias, q, k, v, t])

    t = te.var("T", dtype="int32")
    s = te.placeholder((heads, t, t), f32, name="s")
    r = te.reduce_axis((0, t), name="r")
    mx = te.compute((heads, t), lambda h, i: te.max(s[h, i, r], axis=r), name="mx")
    ex = te.compute((heads, t, t), lambda h, i, j: te.exp((s[h, i, j] - mx[h, i]) * (1.0 / math.sqrt(d))), name="ex")
    r2 = te.reduce_axis((0, t), name="r2")
    sm = te.compute((heads, t), lambda h, i: te.sum(ex[h, i, r2], axis=r2), name="sm")
    p = te.compute((heads, t, t), lambda h, i, j: ex[h, i, j] / sm[h, i], name="p")
    out["softmax"] = te.create_prim_func([s, p, t])

    t = te.var("T", dtype="int32")
    ctx = te.placeholder((heads, t, d), f32, name="ctx")
    merged = te.compute((t, hidden), lambda i, j: ctx[j // d, i, j % d], name="merged")
    out["merge_heads"] = te.create_prim_func([ctx, merged, t])

    t = te.var("T", dtype="int32")
    y = te.placeholder((t, ffn), f32, name="y")
    b1 = te.placeholder((ffn,), f32, name="b1")
    pre = te.compute((t, ffn), lambda i, j: y[i, j] + b1[j], name="pre")
    gelu = te.compute(
        (t, ffn), lambda i, j: 0.5 * pre[i, j] * (1.0 + te.erf(pre[i, j] * (1 / math.sqrt(2)))), name="gelu"
    )
    out["bias_gelu"] = te.create_prim_func([y, b1, gelu, t])

    t = te.var("T", dtype="int32")
    y = te.placeholder((t, hidden), f32, name="y")
    bb = te.placeholder((hidden,), f32, name="bias")
    res = te.placeholder((t, hidden), f32, name="res")
    g = te.placeholder((hidden,), f32, name="gamma")
    beta = te.placeholder((hidden,), f32, name="beta")
    z = te.compute((t, hidden), lambda i, j: y[i, j] + bb[j] + res[i, j], name="z")
    ra = te.reduce_axis((0, hidden), name="ra")
    total = te.compute((t,), lambda i: te.sum(z[i, ra], axis=ra), name="total")
    mean = te.compute((t,), lambda i: total[i] / hidden, name="mean")
    rb = te.reduce_axis((0, hidden), name="rb")
    dev = te.compute((t, hidden), lambda i, j: z[i, j] - mean[i], name="dev")
    sq = te.compute((t,), lambda i: te.sum(dev[i, rb] * dev[i, rb], axis=rb), name="sq")
    var = te.compute((t,), lambda i: sq[i] / hidden, name="var")
    ln = te.compute((t, hidden), lambda i, j: dev[i, j] * te.rsqrt(var[i] + 1e-12) * g[j] + beta[j], name="ln")
    out["bias_residual_layernorm"] = te.create_prim_func([y, bb, res, g, beta, ln, t])
    return out


class BertEncoderLayer:
    """One BERT-base encoder layer for any T, built once from DietCode choices (kernels + dispatcher per GEMM)."""

    def __init__(
        self,
        weights: Mapping[str, np.ndarray],
        choices: Mapping[str, Choice],
        t_range: tuple[int, int],
        target: _target.TargetLike | None = None,
        heads: int = 12,
    ):
        missing = [g for g in GEMMS if g not in choices]
        if missing:
            raise ValueError(f"no DietCode kernels for {missing}")
        self.hidden = int(weights["w_qkv"].shape[0])
        self.ffn = int(weights["w_1"].shape[1])
        self.heads = heads
        self.target = _target.create(target) if target is not None else _target.host()
        self.workloads: dict[str, DynamicWorkload] = bert_workloads(
            t_range, self.hidden, heads, self.ffn, pack_for=self.target
        )
        self.t_range = self.workloads["qkv"].t_range
        funcs: dict[str, tvm.tirx.PrimFunc] = {}
        self._names: dict[str, list[str]] = {}
        self._aligns: dict[str, list[int]] = {}
        for gemm in GEMMS:
            kernels, dispatcher = choices[gemm]
            if [k.key for k in kernels] != list(dispatcher.labels):
                raise ValueError(f"{gemm}: kernels must follow the dispatcher's labels, in order")
            self._names[gemm] = [f"{gemm}_mk{i}" for i in range(len(kernels))]
            self._aligns[gemm] = aligned_versions(self.workloads[gemm], kernels, dispatcher.aligned)
            funcs.update(versioned_funcs(self.workloads[gemm], kernels, self._names[gemm], self._aligns[gemm]))
        for name, func in _glue_funcs(self.hidden, heads, self.ffn).items():
            funcs[name] = func.with_attr("global_symbol", name)
        with self.target:
            self.lib, _ = vector_math.compile_module(tvm.IRModule(funcs), self.target)
        directory = tempfile.mkdtemp(prefix="dietcode-bert-")
        self.dispatchers = {g: CompiledDispatcher(choices[g][1], f"{g}_dispatch", directory) for g in GEMMS}
        self.dev = device_of(self.target)
        self._shapes = {k: tuple(v.shape) for k, v in weights.items()}
        self.weights = self.upload(weights)

    def _gemm(self, gemm: str, t: int, a: tvm.runtime.Tensor, b: tvm.runtime.Tensor) -> tvm.runtime.Tensor:
        shape = self.workloads[gemm].shapes(t)[2]
        c = tvm.runtime.empty(shape, "float32", self.dev)
        i = self.dispatchers[gemm].index(t, warn=False)
        self.lib[serving_name(self._names[gemm][i], self._aligns[gemm][i], t)](a, b, c, t)
        return c

    def upload(self, weights: Mapping[str, np.ndarray]) -> dict[str, tvm.runtime.Tensor]:
        """One layer's weights on the device (another layer of the same shapes runs on the same program); the
        GEMM weights are packed into the layout their kernels read, once, here."""
        missing = sorted(set(self._shapes) - set(weights))
        if missing:
            raise ValueError(f"layer weights lack {missing}")
        out = {}
        for k, v in weights.items():
            if k in self._shapes and tuple(v.shape) != self._shapes[k]:
                raise ValueError(f"weight {k!r} has shape {tuple(v.shape)}, the program expects {self._shapes[k]}")
            host = self.workloads[_WEIGHT_OF[k]].pack_b(v) if k in _WEIGHT_OF else np.ascontiguousarray(v, np.float32)
            out[k] = tvm.runtime.tensor(host, self.dev)
        return out

    def __call__(self, x: np.ndarray) -> np.ndarray:
        """``x``: ``[T, hidden]`` float32; returns the layer's output of the same shape."""
        return self.forward(self.to_device(x), self.weights).numpy()

    def to_device(self, x: np.ndarray) -> tvm.runtime.Tensor:
        """Checks ``x`` is ``[T, hidden]`` (a T outside the tuned range warns) and copies it to the device."""
        if x.ndim != 2 or x.shape[1] != self.hidden:
            raise ValueError(f"input must be [T, {self.hidden}], got {x.shape}")
        check_extent(int(x.shape[0]), self.t_range)
        return tvm.runtime.tensor(np.ascontiguousarray(x, np.float32), self.dev)

    def forward(self, xt: tvm.runtime.Tensor, w: Mapping[str, tvm.runtime.Tensor]) -> tvm.runtime.Tensor:
        """The layer on device tensors, with the weights ``upload`` made (no copy back to the host)."""
        t = int(xt.shape[0])
        lib, dev, d = self.lib, self.dev, self.hidden // self.heads
        empty = lambda *shape: tvm.runtime.empty(shape, "float32", dev)  # noqa: E731
        raw = self._gemm("qkv", t, xt, w["w_qkv"])
        q, k, v = (empty(self.heads, t, d) for _ in range(3))
        lib["split_heads"](raw, w["b_qkv"], q, k, v, t)
        s = self._gemm("scores", t, q, k)
        p = empty(self.heads, t, t)
        lib["softmax"](s, p, t)
        ctx = self._gemm("context", t, p, v)
        merged = empty(t, self.hidden)
        lib["merge_heads"](ctx, merged, t)
        h = empty(t, self.hidden)
        lib["bias_residual_layernorm"](
            self._gemm("attn_out", t, merged, w["w_o"]), w["b_o"], xt, w["ln1_g"], w["ln1_b"], h, t
        )
        f = empty(t, self.ffn)
        lib["bias_gelu"](self._gemm("ffn1", t, h, w["w_1"]), w["b_1"], f, t)
        out = empty(t, self.hidden)
        lib["bias_residual_layernorm"](self._gemm("ffn2", t, f, w["w_2"]), w["b_2"], h, w["ln2_g"], w["ln2_b"], out, t)
        return out


class BertEncoder:
    """BERT's encoder stack (one weight dict per layer) on one compiled DietCode layer program: any T in the
    range runs every layer without recompiling; activations stay on the device between layers."""

    def __init__(
        self,
        layer_weights: Sequence[Mapping[str, np.ndarray]],
        choices: Mapping[str, Choice],
        t_range: tuple[int, int],
        target: _target.TargetLike | None = None,
        heads: int = 12,
    ):
        if not layer_weights:
            raise ValueError("an encoder needs at least one layer's weights")
        self.layer = BertEncoderLayer(layer_weights[0], choices, t_range, target, heads)
        self.t_range = self.layer.t_range
        self.weights = [self.layer.weights] + [self.layer.upload(w) for w in layer_weights[1:]]

    def __call__(self, x: np.ndarray) -> np.ndarray:
        """``x``: ``[T, hidden]`` float32 (one sequence of T tokens); the last layer's output."""
        h = self.layer.to_device(x)
        for w in self.weights:
            h = self.layer.forward(h, w)
        return h.numpy()
