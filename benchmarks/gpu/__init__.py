"""GPU tuning without TVM on the GPU machine, round by round: ``round`` exports each scheme's next candidates, the GPU
machine measures them with the standalone ``cupy_runner.py`` (and cuBLAS/cuDNN with ``torch_reference.py``), ``ingest``
appends its records to each scheme's log, ``report`` tabulates best GFLOPS per round."""
