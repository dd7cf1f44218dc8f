"""DietCode's dispatcher: a decision tree from a runtime extent T to one of a few kernels (plain string labels), and its
emitters. A ``DecisionTreeClassifier`` learns every T's vote exactly, and one walk (``ShapeDispatcher.emit``) emits it
as nested ifs for a Python function, a C function compiled into a tiny shared library for deployments, and Relax ``If``s
in a compiled model (``to_relax``)."""

from __future__ import annotations

import ctypes
import os
import shutil
import subprocess
import tempfile
import warnings
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np
from tvm import relax, tirx

if TYPE_CHECKING:
    from sklearn.tree import DecisionTreeClassifier

__all__ = ["ShapeDispatcher", "CompiledDispatcher", "check_extent", "relax_seq"]

Emitted = TypeVar("Emitted")


def check_extent(t: Any, t_range: tuple[int, int] | None = None, what: str = "T") -> int:
    """``t`` as an int: ValueError unless positive; a warning outside ``t_range`` (correct there, but untuned)."""
    if isinstance(t, bool) or not isinstance(t, (int, np.integer)):
        raise ValueError(f"{what} must be a positive integer, got {t!r} ({type(t).__name__})")
    if t < 1:
        raise ValueError(f"{what} must be a positive integer, got {t}")
    if t_range is not None and not t_range[0] <= t <= t_range[1]:
        warnings.warn(
            f"{what}={t} is outside the tuned range {list(t_range)}: dispatching to the kernel of the "
            "nearest tuned extent",
            RuntimeWarning,
            stacklevel=3,
        )
    return int(t)


class ShapeDispatcher:
    """A decision tree over T whose leaves name kernels (``labels[i]``), stored as plain nested data. ``aligned[i]``
    (optional, measured when the kernels were tuned) is the unit of label ``i``'s aligned version, which the deployment
    runs at a T that is a multiple of it (0: never); ``None`` leaves it to the kernels' defaults."""

    def __init__(
        self,
        labels: Sequence[str],
        tree: dict[str, Any],
        t_range: tuple[int, int],
        aligned: Sequence[int] | None = None,
    ):
        if not labels:
            raise ValueError("a dispatcher needs at least one kernel label")
        self.labels = [str(x) for x in labels]
        self.tree = tree
        self.t_range = (int(t_range[0]), int(t_range[1]))
        if aligned is not None and (
            len(aligned) != len(self.labels)
            or any(isinstance(u, bool) or not isinstance(u, (int, np.integer)) or u < 0 for u in aligned)
        ):
            raise ValueError(
                f"aligned must give one non-negative integer unit per label ({len(self.labels)}), got {list(aligned)!r}"
            )
        self.aligned = None if aligned is None else [int(u) for u in aligned]
        self._fn: Callable[[int], int] | None = None

    def with_aligned(self, aligned: Sequence[int] | None) -> ShapeDispatcher:
        """The same tree with each label's aligned-version unit set (see the class docstring)."""
        return ShapeDispatcher(self.labels, self.tree, self.t_range, aligned)

    @classmethod
    def fit(
        cls, ts: Sequence[int], votes: Sequence[str], t_range: tuple[int, int] | None = None, random_state: int = 0
    ) -> ShapeDispatcher:
        """Learn the votes: ``votes[i]`` is the label T = ``ts[i]`` wants. The tree grows until it is exact."""
        if len(ts) != len(votes) or not ts:
            raise ValueError(f"need one vote per T, got {len(ts)} extents and {len(votes)} votes")
        xs = np.asarray([check_extent(t) for t in ts], dtype=np.int64).reshape(-1, 1)
        labels = sorted(set(str(v) for v in votes))
        ys = np.asarray([labels.index(str(v)) for v in votes])
        rng = t_range if t_range is not None else (int(xs.min()), int(xs.max()))
        if len(labels) == 1:
            return cls(labels, {"leaf": 0}, rng)
        from sklearn.tree import DecisionTreeClassifier  # only a fit needs scikit-learn, not `import adatune`

        clf = DecisionTreeClassifier(random_state=random_state).fit(xs, ys)
        tree = _export(clf)
        out = cls(labels, tree, rng)
        wrong = [int(t) for t, y in zip(xs[:, 0], ys) if out.index(int(t), warn=False) != y]
        if wrong:  # cannot happen for distinct integer extents; guard against duplicated, conflicting votes
            raise ValueError(f"conflicting votes for T in {wrong[:10]}")
        return out

    # ---------------------------------------------------------------- queries
    def index(self, t: Any, warn: bool = True) -> int:
        """Index into ``labels`` of the kernel for ``t``."""
        t = check_extent(t, self.t_range if warn else None)
        node = self.tree
        while "leaf" not in node:
            node = node["left"] if t <= node["le"] else node["right"]
        return int(node["leaf"])

    def __call__(self, t: Any) -> str:
        return self.labels[self.index(t)]

    @property
    def n_leaves(self) -> int:
        return self.emit(lambda _i: 1, lambda _le, left, right: left + right)

    # ---------------------------------------------------------------- emitters: one walk of the tree
    def emit(self, leaf: Callable[[int], Emitted], split: Callable[[int, Emitted, Emitted], Emitted]) -> Emitted:
        """The tree folded bottom-up: ``leaf(index)`` at a leaf, ``split(le, left, right)`` at a node whose
        ``left`` serves ``t <= le``. The Python, C and Relax emitters are this one walk."""

        def walk(node: dict[str, Any]) -> Emitted:
            if "leaf" in node:
                return leaf(int(node["leaf"]))
            return split(int(node["le"]), walk(node["left"]), walk(node["right"]))

        return walk(self.tree)

    def to_python_source(self, name: str = "dispatch") -> str:
        """``def name(t) -> int`` as nested ifs (indices into ``labels``)."""
        body = self.emit(
            lambda i: [f"return {i}"],
            lambda le, left, right: [f"if t <= {le}:", *_indented(left), "else:", *_indented(right)],
        )
        return f"def {name}(t):\n" + "\n".join(_indented(body)) + "\n"

    def to_python(self, name: str = "dispatch") -> Callable[[int], int]:
        """The exported Python source, compiled: ``fn(t) -> index``."""
        if self._fn is None:
            scope: dict[str, Any] = {}
            exec(compile(self.to_python_source(name), f"<dispatcher {name}>", "exec"), scope)  # noqa: S102
            self._fn = scope[name]
        return self._fn

    def to_c_source(self, name: str = "dispatch") -> str:
        """``int name(long long t)``: the kernel index, or -1 for a non-positive T."""
        labels = "\n".join(f"/* {i}: {label} */" for i, label in enumerate(self.labels))
        body = self.emit(
            lambda i: [f"return {i};"],
            lambda le, left, right: [f"if (t <= {le}LL) {{", *_indented(left), "} else {", *_indented(right), "}"],
        )
        return (
            f"/* DietCode dispatcher for T in [{self.t_range[0]}, {self.t_range[1]}] */\n{labels}\n"
            f"int {name}(long long t) {{\n    if (t < 1) return -1;\n" + "\n".join(_indented(body)) + "\n}\n"
        )

    def to_relax(self, t: tirx.Var, leaf: Callable[[int], relax.Expr], out: relax.TensorType) -> relax.SeqExpr:
        """The tree as nested Relax ``If``s on ``t`` (the extent, a TIR variable of the function's shapes), each
        leaf ``leaf(index)`` (an expression of type ``out``): the dispatch as bytecode inside a compiled model."""
        return self.emit(
            lambda i: relax_seq(leaf(i), out),
            lambda le, left, right: relax_seq(relax.If(relax.prim_value(t <= le), left, right), out),
        )

    def to_json(self) -> dict[str, Any]:
        out = {"labels": list(self.labels), "tree": self.tree, "t_range": list(self.t_range)}
        return out if self.aligned is None else {**out, "aligned": list(self.aligned)}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ShapeDispatcher:
        try:
            return cls(data["labels"], data["tree"], tuple(data["t_range"]), data.get("aligned"))  # type: ignore[arg-type]
        except (KeyError, TypeError) as err:
            raise ValueError(f"not a dispatcher description: {err}") from err


def _indented(lines: list[str]) -> list[str]:
    return ["    " + line for line in lines]


def relax_seq(value: relax.Expr, out: relax.TensorType) -> relax.SeqExpr:
    """``value`` bound to a variable of type ``out`` in a sequence of its own (what a Relax ``If`` branch is)."""
    var = relax.Var("c", out)
    return relax.SeqExpr([relax.BindingBlock([relax.VarBinding(var, value)])], var)


def _export(clf: DecisionTreeClassifier) -> dict[str, Any]:
    """sklearn's arrays -> nested dicts; thresholds x.5 between integers become ``t <= floor(x)``."""
    tr = clf.tree_

    def node(i: int) -> dict[str, Any]:
        left, right = int(tr.children_left[i]), int(tr.children_right[i])
        if left == right:  # leaf
            return {"leaf": int(clf.classes_[int(np.argmax(tr.value[i][0]))])}
        return {"le": int(np.floor(tr.threshold[i])), "left": node(left), "right": node(right)}

    return node(0)


class CompiledDispatcher:
    """The dispatcher's C source compiled with the system C compiler into a shared library, called via ctypes."""

    def __init__(
        self,
        dispatcher: ShapeDispatcher,
        name: str = "dietcode_dispatch",
        directory: str | None = None,
        cc: str | None = None,
    ):
        compiler = cc or os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
        if not compiler:
            raise RuntimeError("no C compiler found (set CC) to build the dispatcher")
        self.dispatcher = dispatcher
        self.directory = directory or tempfile.mkdtemp(prefix="dietcode-dispatch-")
        self.source_path = os.path.join(self.directory, f"{name}.c")
        self.library_path = os.path.join(self.directory, f"lib{name}.so")
        with open(self.source_path, "w", encoding="utf-8") as f:
            f.write(dispatcher.to_c_source(name))
        proc = subprocess.run(
            [compiler, "-O2", "-shared", "-fPIC", "-o", self.library_path, self.source_path],
            capture_output=True,
            text=True,
        )
        if proc.returncode != 0:
            raise RuntimeError(f"compiling the dispatcher failed: {proc.stderr.strip()[-2000:]}")
        self._lib = ctypes.CDLL(self.library_path)
        self._fn = getattr(self._lib, name)
        self._fn.argtypes = [ctypes.c_longlong]
        self._fn.restype = ctypes.c_int

    def index(self, t: Any, warn: bool = True) -> int:
        t = check_extent(t, self.dispatcher.t_range if warn else None)
        return int(self._fn(t))

    def raw(self, t: int) -> int:
        """The C function's answer with no Python-side checks (-1 for t < 1)."""
        return int(self._fn(int(t)))

    def __call__(self, t: Any) -> str:
        return self.dispatcher.labels[self.index(t)]
