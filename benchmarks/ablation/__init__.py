"""The AdaTune paper's ablation (NeurIPS 2020, sec. 5.3) as a preset of ``benchmarks.harness``.

Four schemes, each adding one AdaTune component to the AutoTVM baseline:

==============  =========================================================================
XGB+SA          AutoTVM: XGBoost cost model, simulated annealing, deterministic evaluator
RFEI+SA         random forest + expected improvement instead of XGBoost
RFEI+CSA        + contextual simulated annealing (uncertainty-driven exploration)
RFEI+CSA+AE     + adaptive evaluator (``min_converge_coef``): full AdaTune (real measurement only)
==============  =========================================================================
"""

SCHEMES = ("XGB+SA", "RFEI+SA", "RFEI+CSA", "RFEI+CSA+AE")
WORKLOADS = ("conv2d-resnet18-L6", "bmm-bert-nt")
BASELINE = SCHEMES[0]
