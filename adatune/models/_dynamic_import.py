"""PyTorch models with a symbolic extent (a sequence length) imported through Relax.

Each distinct ``(lo, hi)`` range of ``from_torch(..., dynamic=...)`` becomes one ``torch.export.Dim`` (axes of one
range share it, as a sequence length of an input and its mask must). The Relax graph's shapes carry TIR variables
named after torch's symbols; it is kept before legalisation, so ``build_dynamic`` sees ``R.matmul`` calls.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import tvm
from tvm import relax

from ._graph import InputSpec, Model, simplify, torch_reference

__all__ = ["DynamicModel", "DynamicSpec", "import_dynamic", "validate_dynamic"]

DynamicSpec = dict[str, dict[int, tuple[int, int]]]  # input name -> {axis: (lo, hi)}


def _input_names(module: Any, n: int) -> list[str]:
    """The names ``torch.export`` keys ``dynamic_shapes`` by: ``forward``'s first ``n`` positional parameters."""
    params = [
        p.name
        for p in inspect.signature(module.forward).parameters.values()
        if p.kind in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    ]
    if len(params) < n:
        raise ValueError(f"{type(module).__name__}.forward takes {len(params)} positional inputs, got {n} examples")
    return params[:n]


def _bound(v: Any, what: str) -> int:
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
        raise ValueError(f"{what} must be an integer, got {v!r}")
    return int(v)


def validate_dynamic(dynamic: Any, names: Sequence[str], shapes: Sequence[Sequence[int]]) -> DynamicSpec:
    """``dynamic`` checked against the inputs (ValueError naming an unknown input, an axis out of range, or a
    range that is not ``1 <= lo < hi``); axes normalised to non-negative ints."""
    if not isinstance(dynamic, Mapping) or not dynamic:
        raise ValueError(f"dynamic must map input names to {{axis: (lo, hi)}}, got {dynamic!r}")
    out: DynamicSpec = {}
    for name, axes in dynamic.items():
        if name not in names:
            raise ValueError(f"dynamic names an unknown input {name!r} (inputs: {', '.join(names)})")
        ndim = len(shapes[list(names).index(name)])
        if not isinstance(axes, Mapping) or not axes:
            raise ValueError(f"dynamic[{name!r}] must map axes to (lo, hi) ranges, got {axes!r}")
        spec: dict[int, tuple[int, int]] = {}
        for axis, rng in axes.items():
            a = _bound(axis, f"the axis of input {name!r}")
            if not -ndim <= a < ndim:
                raise ValueError(f"axis {a} of input {name!r} is out of range: it has {ndim} dimensions")
            if not isinstance(rng, (tuple, list)) or len(rng) != 2:
                raise ValueError(f"the range of {name!r} axis {a} must be a pair (lo, hi), got {rng!r}")
            lo, hi = (_bound(v, f"the range of {name!r} axis {a}") for v in rng)
            if not 1 <= lo < hi:
                raise ValueError(f"the range of {name!r} axis {a} must satisfy 1 <= lo < hi, got ({lo}, {hi})")
            spec[a % ndim] = (lo, hi)
        out[name] = spec
    return out


def _resize(x: Any, axis: int, size: int) -> Any:
    """``x`` cut or tiled along ``axis`` to ``size``: an example torch can trace without specialising the axis."""
    import torch

    cur = int(x.shape[axis])
    if cur < size:
        x = torch.cat([x] * (-(-size // cur)), dim=axis)
    return x.narrow(axis, 0, size).contiguous()


@dataclass
class DynamicModel(Model):
    """A model whose ``dynamic`` axes take any extent in their range: ``mod`` before legalisation, ``inputs`` at each
    range's top, ``symbols`` each TIR variable's ``(lo, hi)``, ``axes`` each (input, axis)'s variable name.
    """

    dynamic: DynamicSpec = field(default_factory=dict)
    symbols: dict[str, tuple[int, int]] = field(default_factory=dict)
    axes: dict[tuple[str, int], str] = field(default_factory=dict)

    def input_shapes(self, t: int | Mapping[str, int] | None = None) -> list[tuple[int, ...]]:
        """Input shapes with every symbol at ``t`` (an int, or symbol name -> int; None: each range's top)."""
        values = {s: hi for s, (_, hi) in self.symbols.items()}
        if isinstance(t, Mapping):
            values.update({str(k): int(v) for k, v in t.items()})
        elif t is not None:
            values = dict.fromkeys(values, int(t))
        out = []
        for spec in self.inputs:
            shape = list(spec.shape)
            for (name, axis), sym in self.axes.items():
                if name == spec.name:
                    shape[axis] = values[sym]
            out.append(tuple(shape))
        return out

    def random_inputs(self, seed: int = 0, t: int | Mapping[str, int] | None = None) -> list[np.ndarray]:
        rng = np.random.default_rng(seed)
        return [rng.standard_normal(s).astype(i.dtype) for s, i in zip(self.input_shapes(t), self.inputs)]

    def check_inputs(self, arrays: Sequence[np.ndarray]) -> None:
        """As ``Model.check_inputs``, with each dynamic axis anywhere in its range (and equal to every other
        axis of the same symbol)."""
        if len(arrays) != len(self.inputs):
            raise ValueError(f"model {self.name!r} takes {len(self.inputs)} inputs, got {len(arrays)}")
        seen: dict[str, int] = {}
        for spec, arr in zip(self.inputs, arrays):
            if str(arr.dtype) != spec.dtype:
                raise ValueError(f"input {spec.name!r} of model {self.name!r} is {spec.dtype}, got {arr.dtype}")
            if arr.ndim != len(spec.shape):
                raise ValueError(f"input {spec.name!r} of model {self.name!r} has {len(spec.shape)} dimensions")
            for axis, (want, got) in enumerate(zip(spec.shape, arr.shape)):
                sym = self.axes.get((spec.name, axis))
                if sym is None:
                    if want != got:
                        raise ValueError(
                            f"input {spec.name!r} has shape {spec.shape} (axis {axis} fixed), got {arr.shape}"
                        )
                    continue
                lo, hi = self.symbols[sym]
                if not lo <= got <= hi:
                    raise ValueError(f"input {spec.name!r} axis {axis} is {got}, outside its range [{lo}, {hi}]")
                if seen.setdefault(sym, int(got)) != got:
                    raise ValueError(f"input {spec.name!r} axis {axis} is {got}, but {sym} is {seen[sym]} elsewhere")


def import_dynamic(
    module: Any, example: tuple[Any, ...], dynamic: Any, name: str | None = None, fast_math: bool = False
) -> DynamicModel:
    """``from_torch``'s dynamic path (see the module docstring); the module is in eval mode already."""
    import torch
    from tvm.relax.frontend.torch import from_exported_program

    names = _input_names(module, len(example))
    spec = validate_dynamic(dynamic, names, [tuple(x.shape) for x in example])
    ranges = sorted({r for axes in spec.values() for r in axes.values()})
    dims = {r: torch.export.Dim(f"T{i}", min=r[0], max=r[1]) for i, r in enumerate(ranges)}
    traced = list(example)
    for inp, ranges_of in spec.items():
        i = names.index(inp)
        for axis, (lo, hi) in ranges_of.items():
            size = int(traced[i].shape[axis])
            if not (lo <= size <= hi and size >= 2):  # torch specialises an example extent of 1
                traced[i] = _resize(traced[i], axis, max(lo, 2))
    shapes = {n: ({a: dims[r] for a, r in spec[n].items()} if n in spec else None) for n in names}
    with torch.no_grad():
        try:
            exported = torch.export.export(module, tuple(traced), dynamic_shapes=shapes)
        except Exception as err:
            raise ValueError(f"torch.export could not trace the model with dynamic axes {spec}: {err}") from err
        graph = from_exported_program(exported, keep_params_as_input=False)
    graph = simplify(graph, fast_math)
    main = graph["main"]
    symbols: dict[str, tuple[int, int]] = {}
    axes: dict[tuple[str, int], str] = {}
    inputs = []
    for n, param in zip(names, main.params):
        ty = param.ty
        if not isinstance(ty, relax.TensorType) or not hasattr(ty.shape, "values"):
            raise ValueError(f"model input {n!r} is not a tensor with a known shape")
        shape = list(ty.shape.values)
        for axis, (lo, hi) in spec.get(n, {}).items():
            dim = shape[axis]
            if not isinstance(dim, tvm.tirx.Var):
                raise ValueError(f"torch.export fixed input {n!r} axis {axis} to {dim}: the model does not allow it")
            symbols[str(dim.name)] = (lo, hi)
            axes[(n, axis)] = str(dim.name)
            shape[axis] = hi
        if not all(isinstance(d, (int, tvm.tirx.IntImm)) for d in shape):
            raise ValueError(f"input {n!r} has symbolic axes {shape} that dynamic does not name")
        inputs.append(InputSpec(n, tuple(int(d) for d in shape), str(ty.dtype)))
    return DynamicModel(
        name or type(module).__name__,
        graph,
        inputs,
        torch_reference(module),
        source=module,
        dynamic=spec,
        symbols=symbols,
        axes=axes,
    )
