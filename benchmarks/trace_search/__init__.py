"""Trace search benchmark (``python -m benchmarks.trace_search --help``): ``TraceSearchTuner`` vs TVM's ``ms.tune_tir``
(stock and with adatune's plug-ins) vs the knob tuners, on dense-1024, bmm-bert-nt, a fused conv2d+bias+ReLU ResNet-18
layer and a softmax."""
