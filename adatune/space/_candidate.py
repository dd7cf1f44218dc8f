"""The candidate protocol: one thing that tuners propose, cost models score, records store and dispatch applies. A
*candidate* is one point of a task's search space (a knob config, a trace's decisions, a DietCode micro-kernel) with a
stable ``key``, a JSON form (``to_json()``, read back by ``space.decode``), a feature vector (``space.featurize``) and a
way to be applied (``task.instantiate(candidate)``). A ``CandidateSpace`` makes random candidates and one-step
mutations; spaces of fixed discrete choices also offer ``DiscreteSpace``'s digit encoding, which the PPO agent and
k-means sampling move in."""

from __future__ import annotations

import abc
from collections.abc import Collection, Sequence
from typing import Any, ClassVar, Protocol, runtime_checkable

import numpy as np

__all__ = ["Candidate", "CandidateSpace", "DiscreteSpace"]


@runtime_checkable
class Candidate(Protocol):
    """One point of a search space (see the module docstring)."""

    @property
    def key(self) -> str:
        """Stable identity within its space: equal keys mean the same program."""
        ...

    def to_json(self) -> dict[str, Any]:
        """JSON-able form including ``"kind"``; ``space.decode(c.to_json()).key == c.key``."""
        ...


class CandidateSpace(abc.ABC):
    """A task's search space, as tuners see it."""

    #: the candidate kind stored in records ("knob", "trace", "microkernel", ...)
    kind: ClassVar[str] = "candidate"

    @property
    @abc.abstractmethod
    def size(self) -> int:
        """Number of distinct valid candidates (an upper bound where exact counting is infeasible)."""

    @abc.abstractmethod
    def random_candidates(self, rng: np.random.Generator, n: int, exclude: Collection[str] = ()) -> list[Any]:
        """Up to ``n`` distinct valid candidates whose keys are not in ``exclude``."""

    @abc.abstractmethod
    def mutate(self, candidates: Sequence[Any], rng: np.random.Generator) -> list[Any]:
        """One random valid neighbour of each candidate (the candidate itself where it has none)."""

    @abc.abstractmethod
    def featurize(self, candidates: Sequence[Any]) -> np.ndarray:
        """Feature matrix ``(len(candidates), n_features)`` of float32, the same width for every candidate."""

    @abc.abstractmethod
    def decode(self, data: dict[str, Any]) -> Any:
        """The candidate a record's JSON describes; ``ValueError`` when it does not belong to this space."""


class DiscreteSpace(CandidateSpace):
    """A space whose candidates are digit vectors: dimension ``k`` takes ``dims[k]`` values. The PPO agent steps digits
    by -1/0/+1 and adaptive sampling clusters digit vectors; both work on any space that provides this encoding."""

    @property
    @abc.abstractmethod
    def dims(self) -> list[int]:
        """Number of values of each dimension."""

    @abc.abstractmethod
    def encode(self, candidates: Sequence[Any]) -> np.ndarray:
        """Digit matrix ``(len(candidates), len(dims))`` of int64."""

    @abc.abstractmethod
    def from_digits(self, digits: np.ndarray) -> list[Any]:
        """Candidates for rows of digits (each digit in ``[0, dims[k])``)."""

    @abc.abstractmethod
    def valid_digits(self, digits: np.ndarray) -> np.ndarray:
        """Boolean mask: which rows of digits are valid candidates (pass the space's filters)."""
