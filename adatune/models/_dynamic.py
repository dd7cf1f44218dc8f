"""The built-in BERT encoder with a symbolic sequence length, on DietCode kernels.

The static whole-model path compiles one program per input shape; a served BERT sees every length. Here the
zoo's PyTorch ``BertEncoder`` (or any module with its layer layout) gives its weights to one DietCode layer
program compiled once for a range of T, so every length in the range runs without recompiling, and the
output is checked against the PyTorch module it came from.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import cast

import numpy as np
from torch import nn

from .. import target as _target
from ..dietcode import BertEncoder
from ..dietcode._bert import Choice

__all__ = ["bert_layer_weights", "dietcode_bert"]


def _np(t: nn.Parameter | None) -> np.ndarray:
    if t is None:
        raise ValueError("BERT layers need biases on their linear layers")
    return t.detach().cpu().numpy().astype(np.float32)


def bert_layer_weights(model: nn.Module) -> list[dict[str, np.ndarray]]:
    """Per layer, the DietCode layer's weight dict (K-major GEMM weights, Q/K/V concatenated) from a module
    laid out as the zoo's ``BertEncoder``: ``.layers[i]`` with ``q k v o fc1 fc2`` linears, ``ln1 ln2``."""
    layers = getattr(model, "layers", None)
    if layers is None:
        raise ValueError(f"{type(model).__name__} has no .layers: expected the zoo's BertEncoder layout")
    out = []
    for i, layer in enumerate(layers):
        try:
            q, k, v, o, fc1, fc2 = (getattr(layer, n) for n in ("q", "k", "v", "o", "fc1", "fc2"))
            ln1, ln2 = layer.ln1, layer.ln2
        except AttributeError as err:
            raise ValueError(f"layer {i} is not a BERT layer ({err})") from err
        out.append(
            {
                "w_qkv": np.concatenate([_np(m.weight).T for m in (q, k, v)], axis=1),
                "b_qkv": np.concatenate([_np(m.bias) for m in (q, k, v)]),
                "w_o": np.ascontiguousarray(_np(o.weight).T),
                "b_o": _np(o.bias),
                "ln1_g": _np(ln1.weight),
                "ln1_b": _np(ln1.bias),
                "w_1": np.ascontiguousarray(_np(fc1.weight).T),
                "b_1": _np(fc1.bias),
                "w_2": np.ascontiguousarray(_np(fc2.weight).T),
                "b_2": _np(fc2.bias),
                "ln2_g": _np(ln2.weight),
                "ln2_b": _np(ln2.bias),
            }
        )
    return out


def dietcode_bert(
    model: nn.Module,
    choices: Mapping[str, Choice],
    t_range: tuple[int, int],
    target: _target.TargetLike | None = None,
) -> BertEncoder:
    """The module's encoder compiled once on DietCode ``choices`` (per GEMM: kernels and dispatcher, as
    ``DietCodeResult`` gives them); call it with ``[T, hidden]`` for any T in ``t_range``."""
    weights = bert_layer_weights(model)
    heads = int(getattr(next(iter(cast(nn.ModuleList, model.layers))), "heads", 12))
    return BertEncoder(weights, choices, t_range, target, heads)
