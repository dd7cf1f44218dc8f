"""Whole models: import (PyTorch, ONNX, built-in ResNet-18 and BERT-base), one task per fused function, one tuning
budget over all of them, and a compiled, deployable model with the best schedule of every task
(``import adatune.models as am``)::

    model = am.load_builtin("resnet18")               # or am.from_torch(module, inputs), am.from_onnx(path, shapes)
    am.tune_model(model, "resnet18.jsonl", n_trial=2000, strategy="gradient", tuner="xgb")
    compiled = am.build(model, "resnet18.jsonl")
    print(am.latency_table(compiled))                  # median s per inference: adatune, pytorch, onnxruntime

A symbolic extent (``from_torch(..., dynamic=...)``, a ``DynamicModel``) compiles once for its whole range, GEMMs
on DietCode micro-kernels: ``tune_dynamic`` then ``build_dynamic``.
"""

from ..codegen.generic_schedule import schedule_generic
from ._breakdown import CallTime, KernelBreakdown, kernel_breakdown
from ._build import CompiledModel, build
from ._dynamic_build import build_dynamic, dynamic_workloads, tune_dynamic
from ._dynamic_import import DynamicModel
from ._extract import MODEL_PREFIX, FusedKnobTask, ModelTask, extract_tasks, format_task_table, model_tasks
from ._frontend import InputSpec, Model, from_onnx, from_relax, from_torch, load_builtin, prepare
from ._latency import FRAMEWORKS, LatencyTable, compiled_latency, framework_latency, latency_table, onnx_proto
from ._layout import convert_conv_layout, resolve_conv_layout
from ._scheduler import STRATEGIES, TuneSummary, model_runner, tune_model
from ._zoo import BUILTIN_MODELS, bert_base, bert_large, resnet18, resnet34

__all__ = [
    "BUILTIN_MODELS",
    "CallTime",
    "CompiledModel",
    "KernelBreakdown",
    "kernel_breakdown",
    "build",
    "build_dynamic",
    "DynamicModel",
    "dynamic_workloads",
    "tune_dynamic",
    "schedule_generic",
    "FRAMEWORKS",
    "LatencyTable",
    "compiled_latency",
    "framework_latency",
    "latency_table",
    "onnx_proto",
    "convert_conv_layout",
    "resolve_conv_layout",
    "STRATEGIES",
    "TuneSummary",
    "tune_model",
    "model_runner",
    "MODEL_PREFIX",
    "FusedKnobTask",
    "InputSpec",
    "Model",
    "ModelTask",
    "bert_base",
    "bert_large",
    "extract_tasks",
    "format_task_table",
    "from_onnx",
    "from_relax",
    "from_torch",
    "load_builtin",
    "prepare",
    "model_tasks",
    "resnet18",
    "resnet34",
]

#: names removed with the hand-built dynamic BERT, and what replaces them
_REMOVED = {
    "dietcode_bert": "from_torch(module, inputs, dynamic=...), tune_dynamic and build_dynamic compile any PyTorch "
    "module with a symbolic extent, BERT included",
    "bert_layer_weights": "from_torch(module, inputs, dynamic=...) reads a module's weights itself; see "
    "adatune.models.build_dynamic",
}


def __getattr__(name: str) -> object:
    if name in _REMOVED:
        raise AttributeError(f"adatune.models.{name} was removed: {_REMOVED[name]}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
