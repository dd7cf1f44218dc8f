"""GPU tuning without TVM on the GPU machine, round by round: ``round`` picks each scheme's next candidates
here and exports them, the GPU machine measures them with the standalone ``cupy_runner.py`` (and times
cuBLAS/cuDNN through PyTorch with ``torch_reference.py``), ``ingest`` appends its records to each scheme's log,
``report`` tabulates best GFLOPS per round. See ``python -m benchmarks.gpu --help``."""
