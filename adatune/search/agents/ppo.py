"""ReLeASE's search agent: proximal policy optimisation over knob vectors, rewarded by the cost model.

Where simulated annealing moves one random knob at a time, every knob moves at once, so an episode climbs in a few
dozen steps. State: knob indices scaled to [-1, 1]; action: per knob one of {decrement, stay, increment}, clamped
(a factored categorical); reward: the model's predicted throughput. A shared layer feeds policy and value heads,
trained by PPO with GAE after every episode; many walkers move in parallel, like SA's chains.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import nn

from ...space._candidate import DiscreteSpace
from ..optimizers import ModelOptimizer, ScoreFn

DigitScoreFn = Callable[[np.ndarray], np.ndarray]

__all__ = ["PPOAgent", "PolicyValueNet", "Episode", "RunningScale"]

logger = logging.getLogger("adatune.agent")

_N_ACTIONS = 3  # decrement, stay, increment


class PolicyValueNet(nn.Module):
    """One shared hidden layer, then per-knob action logits and a state value."""

    def __init__(self, n_knobs: int, hidden: int = 64):
        super().__init__()
        self.n_knobs = n_knobs
        self.shared = nn.Linear(n_knobs, hidden)
        self.policy = nn.Linear(hidden, n_knobs * _N_ACTIONS)
        self.value = nn.Linear(hidden, 1)
        with torch.no_grad():  # start close to uniform so early episodes explore
            self.policy.weight.mul_(0.01)
            self.policy.bias.zero_()

    def forward(self, state: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = torch.tanh(self.shared(state))
        return self.policy(h).view(-1, self.n_knobs, _N_ACTIONS), self.value(h).squeeze(-1)


class RunningScale:
    """Running standard deviation of rewards, so cost models with any score scale train the agent alike."""

    def __init__(self) -> None:
        self.n, self.mean, self.m2 = 0, 0.0, 0.0

    def update(self, x: np.ndarray) -> None:
        """Merge a batch into the running moments (Chan et al.'s parallel update)."""
        x = np.asarray(x, dtype=np.float64).ravel()
        if x.size == 0:
            return
        n, mean, m2 = x.size, float(x.mean()), float(((x - x.mean()) ** 2).sum())
        total = self.n + n
        delta = mean - self.mean
        self.mean += delta * n / total
        self.m2 += m2 + delta * delta * self.n * n / total
        self.n = total

    @property
    def std(self) -> float:
        return float(np.sqrt(self.m2 / self.n)) if self.n > 1 else 1.0


@dataclass
class Episode:
    """One rollout of all walkers: tensors are (steps, walkers, ...); ``raw_rewards`` are unscaled scores."""

    states: torch.Tensor
    actions: torch.Tensor
    log_probs: torch.Tensor
    values: torch.Tensor
    rewards: torch.Tensor
    last_value: torch.Tensor
    raw_rewards: np.ndarray
    visited: np.ndarray  # digits of each walker after each step: (steps, walkers, knobs)
    final_points: np.ndarray

    @property
    def length(self) -> int:
        return int(self.states.shape[0])

    @property
    def mean_reward(self) -> float:
        return float(self.raw_rewards.mean())


@contextlib.contextmanager
def _torch_threads(n: int | None) -> Iterator[None]:
    """Run with ``n`` intra-op threads (the nets are tiny; more threads only oversubscribe the cores)."""
    if n is None:
        yield
        return
    prev = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(prev)


class PPOAgent(ModelOptimizer):
    """A ``ModelOptimizer`` whose search is a PPO agent; the policy persists across ``find_maximums`` calls.

    Each call runs up to ``max_episodes`` episodes of ``parallel_size`` walkers, which continue where the last episode
    left them, as in the paper (``restart_ratio`` > 0 sends that share to random configs first). An episode ends once
    at most ``1 - stop_ratio`` of the knobs moved in a step, or after ``step_cap`` steps (a truncation: its last value
    is bootstrapped); a call ends once an episode leaves the top-``num`` set unchanged. ``last_steps`` /
    ``steps_history`` count search steps per call.

    Defaults are the paper's (Adam lr 1e-3, discount 0.9, GAE lambda 0.99, 3 epochs, clip 0.3, value coefficient 1.0,
    entropy coefficient 0.1 on the mean per-knob entropy). Rewards are divided by their running standard deviation,
    advantages standardised per episode, gradients clipped to ``max_grad_norm``.

    Where this leaves the paper: the entropy bonus is the mean over knobs of each knob's entropy, 1/d of the sum a
    factored policy's entropy is (the paper gives the coefficient, not the form), so it does not grow with the number
    of knobs. A call asks the model at most ``parallel_size * step_cap * max_episodes`` times, far fewer than SA: each
    of the agent's steps moves every knob, and the paper counts its advantage in such steps."""

    def __init__(
        self,
        space: DiscreteSpace,
        rng: np.random.Generator | None = None,
        seed: int | None = None,
        parallel_size: int = 64,
        step_cap: int = 32,
        max_episodes: int = 4,
        stop_ratio: float = 0.9,
        restart_ratio: float = 0.0,
        hidden: int = 64,
        lr: float = 1e-3,
        gamma: float = 0.9,
        gae_lambda: float = 0.99,
        epochs: int = 3,
        clip: float = 0.3,
        value_coef: float = 1.0,
        entropy_coef: float = 0.1,
        minibatch_size: int = 64,
        max_grad_norm: float | None = 0.5,
        num_threads: int | None = 1,
    ):
        if not 0 < stop_ratio <= 1:
            raise ValueError(f"stop_ratio must be in (0, 1], got {stop_ratio}")
        if not 0 <= restart_ratio <= 1:
            raise ValueError(f"restart_ratio must be in [0, 1], got {restart_ratio}")
        if min(parallel_size, step_cap, max_episodes, epochs, minibatch_size) < 1:
            raise ValueError("parallel_size, step_cap, max_episodes, epochs and minibatch_size must be positive")
        if not isinstance(space, DiscreteSpace):
            raise TypeError(f"the PPO agent moves digit vectors: it needs a DiscreteSpace, got {type(space).__name__}")
        self.space = space
        self.rng = rng if rng is not None else np.random.default_rng(seed)
        self.parallel_size = int(max(1, min(parallel_size, space.size)))
        self.step_cap, self.max_episodes = step_cap, max_episodes
        self.stop_ratio, self.restart_ratio = stop_ratio, restart_ratio
        self.gamma, self.gae_lambda, self.epochs, self.clip = gamma, gae_lambda, epochs, clip
        self.value_coef, self.entropy_coef = value_coef, entropy_coef
        self.minibatch_size, self.max_grad_norm, self.num_threads = minibatch_size, max_grad_norm, num_threads

        self.dims = np.asarray(space.dims, dtype=np.int64)
        self.movable = torch.as_tensor(self.dims > 1)
        torch_seed = int(self.rng.integers(2**63 - 1))
        self.generator = torch.Generator().manual_seed(torch_seed)
        with torch.random.fork_rng(devices=[]):  # seeded init without touching the global torch RNG
            torch.manual_seed(torch_seed)
            self.net = PolicyValueNet(len(self.dims), hidden)
        self.optimizer = torch.optim.Adam(self.net.parameters(), lr=lr)
        self.reward_scale = RunningScale()
        self.points: np.ndarray | None = None
        self._visited: list[np.ndarray] = []  # digits the walkers stood on in the last call
        self.last_steps = 0
        self.steps_history: list[int] = []
        self.reward_history: list[float] = []  # mean raw reward of every episode

    # -- encoding: walkers are digit vectors (n, knobs) of the space ------------------------------
    def state(self, digits: np.ndarray) -> torch.Tensor:
        span = np.maximum(self.dims - 1, 1)
        return torch.as_tensor(2.0 * digits / span - 1.0, dtype=torch.float32)

    def step_points(self, points: np.ndarray, actions: np.ndarray) -> np.ndarray:
        """Per-knob moves (action - 1), clamped to each knob's range; a walker moving to a filtered-out one stays."""
        points = np.asarray(points, dtype=np.int64)
        new = np.clip(points + (np.asarray(actions, dtype=np.int64) - 1), 0, self.dims - 1)
        ok = np.asarray(self.space.valid_digits(new), dtype=bool)
        return np.where(ok[:, None], new, points)

    def random_points(self, n: int) -> np.ndarray:
        got = self.space.encode(self.space.random_candidates(self.rng, n))
        if len(got) == 0:
            raise ValueError("the space has no valid candidate to start a walker from")
        while len(got) < n:  # tiny spaces: repeat candidates so every walker has a start
            got = np.concatenate([got, got[: n - len(got)]])
        return np.asarray(got, dtype=np.int64)

    # -- acting -----------------------------------------------------------------------------------
    def _act(self, state: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        logits, value = self.net(state)
        probs = torch.softmax(logits, dim=-1)
        actions = torch.multinomial(probs.reshape(-1, _N_ACTIONS), 1, generator=self.generator)
        actions = actions.view(state.shape[0], -1)
        log_probs = self._log_prob(logits, actions)
        return actions, log_probs, value

    def _log_prob(self, logits: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
        lp = torch.log_softmax(logits, dim=-1).gather(-1, actions.unsqueeze(-1)).squeeze(-1)
        return (lp * self.movable).sum(-1)

    def _entropy(self, logits: torch.Tensor) -> torch.Tensor:
        logp = torch.log_softmax(logits, dim=-1)
        return (-(logp.exp() * logp).sum(-1) * self.movable).sum(-1) / max(int(self.movable.sum()), 1)

    @torch.no_grad()
    def run_episode(self, score: DigitScoreFn, start: np.ndarray) -> Episode:
        """Walk from ``start`` (digits) until most knobs stop or ``step_cap`` steps, each step rewarded by ``score``."""
        points = np.asarray(start, dtype=np.int64)
        states: list[torch.Tensor] = []
        actions: list[torch.Tensor] = []
        log_probs: list[torch.Tensor] = []
        values: list[torch.Tensor] = []
        raws: list[np.ndarray] = []
        visited: list[np.ndarray] = []
        digits = points
        movable = self.movable.numpy()
        for _ in range(self.step_cap):
            s = self.state(digits)
            a, lp, v = self._act(s)
            new_points = self.step_points(points, a.numpy())
            raw = np.asarray(score(new_points), dtype=np.float64)
            new_digits = new_points
            states.append(s)
            actions.append(a)
            log_probs.append(lp)
            values.append(v)
            raws.append(raw)
            visited.append(new_points)
            moving = (new_digits != digits)[:, movable].mean() if movable.any() else 0.0
            digits, points = new_digits, new_points
            if moving <= 1.0 - self.stop_ratio:  # most knobs stopped moving
                break
        _, last_value = self.net(self.state(points))
        raw_rewards = np.stack(raws)
        self.reward_scale.update(raw_rewards)
        rewards = torch.as_tensor(raw_rewards / (self.reward_scale.std + 1e-8), dtype=torch.float32)
        ep = Episode(
            torch.stack(states),
            torch.stack(actions),
            torch.stack(log_probs),
            torch.stack(values),
            rewards,
            last_value,
            raw_rewards,
            np.stack(visited),
            points,
        )
        self.reward_history.append(ep.mean_reward)
        return ep

    # -- learning ---------------------------------------------------------------------------------
    def advantages(self, ep: Episode) -> tuple[torch.Tensor, torch.Tensor]:
        """Generalised advantage estimates and value targets (the episode is truncated, not terminal)."""
        adv = torch.zeros_like(ep.rewards)
        next_value, running = ep.last_value, torch.zeros_like(ep.last_value)
        for t in reversed(range(ep.length)):
            delta = ep.rewards[t] + self.gamma * next_value - ep.values[t]
            running = delta + self.gamma * self.gae_lambda * running
            adv[t] = running
            next_value = ep.values[t]
        return adv, adv + ep.values

    def learn(self, ep: Episode) -> dict[str, float]:
        """PPO's clipped objective for ``epochs`` passes over the episode in shuffled minibatches."""
        adv, returns = self.advantages(ep)
        n = ep.length * ep.states.shape[1]
        states = ep.states.reshape(n, -1)
        actions = ep.actions.reshape(n, -1)
        old_lp, adv, returns = ep.log_probs.reshape(n), adv.reshape(n), returns.reshape(n)
        adv = (adv - adv.mean()) / (adv.std() + 1e-8) if n > 1 else adv
        size = self.minibatch_size
        stats: dict[str, float] = {}
        for _ in range(self.epochs):
            order = torch.randperm(n, generator=self.generator)
            for lo in range(0, n, size):
                mb = order[lo : lo + size]
                logits, value = self.net(states[mb])
                ratio = torch.exp(self._log_prob(logits, actions[mb]) - old_lp[mb])
                clipped = torch.clamp(ratio, 1.0 - self.clip, 1.0 + self.clip)
                policy_loss = -torch.min(ratio * adv[mb], clipped * adv[mb]).mean()
                value_loss = (returns[mb] - value).pow(2).mean()
                entropy = self._entropy(logits).mean()
                loss = policy_loss + self.value_coef * value_loss - self.entropy_coef * entropy
                self.optimizer.zero_grad()
                loss.backward()
                if self.max_grad_norm is not None:
                    nn.utils.clip_grad_norm_(self.net.parameters(), self.max_grad_norm)
                self.optimizer.step()
                stats = {"policy_loss": policy_loss.item(), "value_loss": value_loss.item(), "entropy": entropy.item()}
        return stats

    def train_episode(self, score: DigitScoreFn, start: np.ndarray) -> Episode:
        with _torch_threads(self.num_threads):
            ep = self.run_episode(score, start)
            self.learn(ep)
        return ep

    # -- ModelOptimizer ---------------------------------------------------------------------------
    def _restart(self, points: np.ndarray) -> np.ndarray:
        """Send ``restart_ratio`` of the walkers to random configs (none by default: the paper's walkers
        continue); restarts make the policy climb from anywhere and spread the trajectory over more basins."""
        n_new = int(round(self.restart_ratio * len(points)))
        if n_new == 0:
            return points
        points = points.copy()
        who = self.rng.choice(len(points), size=n_new, replace=False)
        points[who] = self.random_points(n_new)
        return points

    def find_maximums(self, score: ScoreFn, num: int, exclusive: Collection[str]) -> list[Any]:
        def score_digits(d: np.ndarray) -> np.ndarray:
            return np.asarray(score(self.space.from_digits(d)), dtype=np.float64)

        if not self.movable.any():  # a single config: nothing to search
            self.last_steps = 0
            self.steps_history.append(0)
            return [c for c in self.space.random_candidates(self.rng, num, exclude=exclusive)]
        if self.points is None or len(self.points) != self.parallel_size:
            points = self.random_points(self.parallel_size)
        else:
            points = self._restart(self.points)
        pool: dict[bytes, tuple[float, np.ndarray]] = {}
        self._offer(pool, points, score_digits(points))
        self._visited = [points]
        top = self._top(pool, num, exclusive)
        steps = 0
        for _ in range(self.max_episodes):
            ep = self.train_episode(score_digits, points)
            steps += ep.length
            self._offer(pool, ep.visited.reshape(-1, len(self.dims)), ep.raw_rewards.ravel())
            self._visited.append(ep.visited.reshape(-1, len(self.dims)))
            new_top = self._top(pool, num, exclusive)
            points = self._restart(ep.final_points)
            if [c.key for c in new_top] == [c.key for c in top] and len(new_top) >= num:
                break
            top = new_top
        self.points = points
        self.last_steps = steps
        self.steps_history.append(steps)
        logger.debug("PPO: %d steps, %d candidates seen, mean reward %.4g", steps, len(pool), self.reward_history[-1])
        return top

    def trajectory(self) -> list[Any]:
        """Every state the walkers stood on in the last call (starts and each step of every episode)."""
        if not self._visited:
            return []
        return self.space.from_digits(np.concatenate(self._visited))

    @staticmethod
    def _offer(pool: dict[bytes, tuple[float, np.ndarray]], digits: np.ndarray, scores: np.ndarray) -> None:
        for row, s in zip(np.asarray(digits, dtype=np.int64), scores):
            pool[row.tobytes()] = (float(s), row)

    def _top(self, pool: dict[bytes, tuple[float, np.ndarray]], num: int, exclusive: Collection[str]) -> list[Any]:
        ranked = sorted(pool.values(), key=lambda t: (-t[0], t[1].tolist()))
        out: list[Any] = []
        for start in range(0, len(ranked), max(num, 16)):
            chunk = ranked[start : start + max(num, 16)]
            for cand in self.space.from_digits(np.stack([r for _, r in chunk])):
                if str(cand.key) not in exclusive:
                    out.append(cand)
                    if len(out) >= num:
                        return out
        return out
