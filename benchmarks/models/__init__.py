"""Whole-model benchmark: ResNet-18 and BERT-base against untuned TVM, PyTorch and onnxruntime."""
