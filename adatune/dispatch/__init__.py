"""Dispatch: which candidate a program gets when it is compiled for real.

- ``apply_history_best(log)``: a context manager; template calls inside it use the best record of their
  workload on the current target (AutoTVM's ``ApplyHistoryBest``), with a fallback that warns once per workload.
"""

from ._history import ApplyHistoryBest, DispatchContext, apply_history_best, query_config

__all__ = ["DispatchContext", "ApplyHistoryBest", "apply_history_best", "query_config"]
