"""ReLeASE (Ahn et al., 2019; Chameleon, ICLR 2020) against AutoTVM, as a preset of ``benchmarks.harness``.

========  ===============================================================================
XGB+SA    AutoTVM: XGBoost cost model + simulated annealing, top-plan_size batches
RL        XGBoost + the PPO search agent (``ReleaseTuner(sampler=None)``)
SA+AS     XGBoost + simulated annealing + k-means adaptive sampling
RL+AS     XGBoost + PPO agent + adaptive sampling: full ReLeASE (``ReleaseTuner``)
========  ===============================================================================
"""

SCHEMES = ("XGB+SA", "RL", "SA+AS", "RL+AS")
WORKLOADS = ("conv2d-resnet18-L6", "conv2d-resnet18-L9", "conv2d-resnet18-L11")
BASELINE = SCHEMES[0]
