"""Learned search agents that stand in for a model optimizer (ReLeASE's PPO agent)."""

from .ppo import Episode, PolicyValueNet, PPOAgent, RunningScale

__all__ = ["PPOAgent", "PolicyValueNet", "Episode", "RunningScale"]
