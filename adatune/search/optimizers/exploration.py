"""The one exploration policy: how much of a plan is random, and which random candidates fill it.

AutoTVM spends a fixed share ``eps_greedy`` of every plan on random candidates; AdaTune (NeurIPS 2020, sec. 4.2) sets it
after each refit from the model's uncertainty over K unmeasured candidates, ``eps_t = mean(sigma(x_k)) / f(x+)`` clamped
to [0, 1]. ReLeASE's adaptive sampling (ICLR 2020, sec. 4.2 and Algorithm 2: NextSamples are the centroids) replaces
AutoTVM's epsilon-greedy rather than adding to it, so a tuner with a sampler explores at random only when ``eps_greedy``
is given (``default_eps_greedy``)."""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Collection, Sequence
from typing import Any, Protocol

import numpy as np

from ...options import Configurable, Option
from ...space._candidate import CandidateSpace

__all__ = [
    "EPS_GREEDY",
    "N_CONTEXT",
    "ExplorationPolicy",
    "UncertaintyModel",
    "default_eps_greedy",
    "exploration_rate",
    "random_share",
]

EPS_GREEDY = Option.declare(
    "eps_greedy",
    float,
    "fixed share of each plan measured at random (none: 0.05; 0 with adaptive sampling; eps_t with contextual "
    "exploration)",
    minimum=0.0,
    maximum=1.0,
)
N_CONTEXT = Option.declare("n_context", int, "unmeasured candidates eps_t is estimated on", minimum=1)

logger = logging.getLogger("adatune.optimizer")


class UncertaintyModel(Protocol):
    """What contextual exploration needs from a cost model (``RFEICostModel`` provides it)."""

    @property
    def best_flops(self) -> float: ...

    def predict_mean_std(self, xs: Any) -> tuple[np.ndarray, np.ndarray]: ...


def exploration_rate(sigma: np.ndarray, best_flops: float) -> float:
    """eps_t = mean sigma / best measured throughput, clamped to [0, 1] (1 when nothing is known yet)."""
    sigma = np.asarray(sigma, dtype=np.float64)
    if not best_flops > 0 or len(sigma) == 0:
        return 1.0
    eps = float(np.mean(sigma)) / float(best_flops)
    return float(np.clip(eps, 0.0, 1.0)) if np.isfinite(eps) else 1.0


def default_eps_greedy(eps_greedy: float | None, adaptive_sampling: bool) -> float:
    """The fixed random share: the one given, else AutoTVM's 0.05, or 0 with a sampler (ReLeASE measures centroids)."""
    if eps_greedy is not None:
        return float(eps_greedy)
    return 0.0 if adaptive_sampling else 0.05


def random_share(eps: float, n: int, rng: np.random.Generator) -> int:
    """How many of ``n`` picks are random: ``eps * n`` rounded stochastically, so a small plan still explores."""
    exact = min(max(float(eps), 0.0), 1.0) * n
    whole = math.floor(exact)
    return min(n, whole + int(rng.random() < exact - whole))


class ExplorationPolicy(Configurable):
    """A fixed ``eps_greedy``, or AdaTune's eps_t when ``model`` (with ``featurize``) is given. ``history`` holds the
    exploration rate of every plan; ``splits`` the (model, random) counts of each."""

    OPTIONS = (EPS_GREEDY, N_CONTEXT)

    def __init__(
        self,
        eps_greedy: float = 0.05,
        model: UncertaintyModel | None = None,
        featurize: Callable[[Sequence[Any]], Any] | None = None,
        n_context: int = 64,
    ):
        if model is not None and featurize is None:
            raise ValueError("contextual exploration needs featurize to score the context candidates")
        self.eps_greedy = float(eps_greedy)
        self.model = model
        self.featurize = featurize
        self.n_context = int(n_context)
        self.history: list[float] = []
        self.splits: list[tuple[int, int]] = []

    @property
    def contextual(self) -> bool:
        return self.model is not None

    def rate(self, space: CandidateSpace, rng: np.random.Generator, exclude: Collection[str]) -> float:
        """This plan's exploration rate: eps_t over ``n_context`` random unmeasured candidates, or eps_greedy."""
        if self.model is None or self.featurize is None:
            return self.eps_greedy
        context = space.random_candidates(rng, self.n_context, exclude=exclude)
        if not context:
            return 0.0
        _, sigma = self.model.predict_mean_std(self.featurize(context))
        return exploration_rate(sigma, self.model.best_flops)

    def plan(
        self,
        space: CandidateSpace,
        rng: np.random.Generator,
        num: int,
        exclude: Collection[str],
        exploit: Callable[[int], Sequence[Any]],
        sized_by_search: bool = False,
    ) -> list[Any]:
        """``num`` candidates: ``exploit(m)``'s best (m = num less the random share), then random unmeasured ones,
        which also top up a plan the exploiting search could not fill. With ``sized_by_search`` (adaptive
        sampling) every exploit pick is kept and only the random share is added: the search sets the length."""
        eps = self.rate(space, rng, exclude)
        n_random = random_share(eps, num, rng)
        picks: list[Any] = []
        taken = set(exclude)
        cap = None if sized_by_search else num - n_random
        for cand in exploit(num - n_random) if num > n_random else ():
            if (cap is None or len(picks) < cap) and str(cand.key) not in taken:
                picks.append(cand)
                taken.add(str(cand.key))
        n_fill = n_random if sized_by_search else num - len(picks)
        randoms = space.random_candidates(rng, n_fill, exclude=taken)
        self.history.append(eps)
        self.splits.append((len(picks), len(randoms)))
        logger.info(
            "plan %d: %s=%.3f -> %d model + %d random of %d",
            len(self.history),
            "eps_t" if self.contextual else "eps_greedy",
            eps,
            len(picks),
            len(randoms),
            num,
        )
        return picks + randoms
