"""One benchmark harness for every search-strategy comparison: schemes x workloads x seeds.

Every run drives the library's own loop (``Tuner.tune``) with either the replay runner over a recorded sweep (many
seeds, cheap) or real measurement on this CPU. ``report`` turns the runs into JSON, CSV, a markdown summary and PNG
plots with bootstrap confidence intervals and rank tests; every result carries the host description. The AdaTune
ablation and the ReLeASE comparison are presets of it (``python -m benchmarks.harness.preset ablation|release``).

    python -m benchmarks.harness replay --sweeps 'benchmarks/data/*.jsonl*' --seeds 20
    python -m benchmarks.harness hardware --workloads bmm-bert-nt --schemes XGB+SA RFEI+CSA+AE --budget 60
    python -m benchmarks.harness evaluator --workloads bmm-bert-nt dense-bert-qkv
"""

from .schemes import BASELINE, SCHEMES, Scheme, make_tuner

__all__ = ["SCHEMES", "Scheme", "BASELINE", "make_tuner"]
