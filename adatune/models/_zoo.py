"""Built-in models in plain PyTorch with seeded random weights (no download, no torchvision): ``resnet18`` and
``resnet34`` (batch 1, 3x224x224, BatchNorm with non-trivial statistics; ResNet-34's convolutions are ResNet-18's
shapes, more of them, which is what a tuning cache across models is for), ``bert-base`` and ``bert-large`` (sequence
128, batch 1, their linear layers on ``[B*S, H]`` rows so they are 2-D GEMMs for the ``dense`` template).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

__all__ = [
    "BUILTIN_MODELS", "BuiltinModel", "builtin_model", "resnet18", "resnet34", "bert_base", "bert_large",
    "fold_batch_norms",
]  # fmt: skip


class _BasicBlock(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.down: nn.Module | None = None
        if stride != 1 or cin != cout:
            self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x if self.down is None else self.down(x)
        y = F.relu(self.bn1(self.conv1(x)))
        return F.relu(self.bn2(self.conv2(y)) + identity)


class ResNet(nn.Module):
    """ResNet-18 (``depths`` 2, 2, 2, 2) or ResNet-34 (3, 4, 6, 3) (He et al. 2016) for 224x224 images, 1000 classes."""

    def __init__(self, depths: tuple[int, ...] = (2, 2, 2, 2), num_classes: int = 1000):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 64, 7, 2, 3, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        self.pool = nn.MaxPool2d(3, 2, 1)
        blocks = []
        for i, n in enumerate(depths):  # stage i: 64 << i channels; from stage 1 its first block halves the map
            cin, cout = 64 << max(i - 1, 0), 64 << i
            blocks += [_BasicBlock(cin if j == 0 else cout, cout, 2 if i and j == 0 else 1) for j in range(n)]
        self.blocks = nn.Sequential(*blocks)
        self.fc = nn.Linear(512, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.pool(F.relu(self.bn1(self.conv1(x))))
        x = self.blocks(x)
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


class _BertLayer(nn.Module):
    def __init__(self, hidden: int, heads: int, ffn: int):
        super().__init__()
        self.heads, self.head_dim = heads, hidden // heads
        self.q, self.k, self.v, self.o = (nn.Linear(hidden, hidden) for _ in range(4))
        self.ln1 = nn.LayerNorm(hidden, eps=1e-12)
        self.fc1 = nn.Linear(hidden, ffn)
        self.fc2 = nn.Linear(ffn, hidden)
        self.ln2 = nn.LayerNorm(hidden, eps=1e-12)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # x: [B*S, H], one sequence of S tokens per batch row
        rows, hidden = x.shape
        seq = rows  # batch 1: every row is one token of the sequence

        def heads(t: torch.Tensor) -> torch.Tensor:  # [S, H] -> [heads, S, head_dim]
            return t.reshape(seq, self.heads, self.head_dim).permute(1, 0, 2)

        q, k, v = heads(self.q(x)), heads(self.k(x)), heads(self.v(x))
        att = torch.softmax(torch.matmul(q, k.transpose(1, 2)) / math.sqrt(self.head_dim), dim=-1)
        ctx = torch.matmul(att, v).permute(1, 0, 2).reshape(rows, hidden)
        x = self.ln1(x + self.o(ctx))
        return self.ln2(x + self.fc2(F.gelu(self.fc1(x))))


class BertEncoder(nn.Module):
    """BERT's encoder stack on embedded tokens ``[1, S, H]`` (batch 1)."""

    def __init__(self, layers: int = 12, hidden: int = 768, heads: int = 12, ffn: int = 3072):
        super().__init__()
        self.layers = nn.ModuleList([_BertLayer(hidden, heads, ffn) for _ in range(layers)])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, seq, hidden = x.shape
        h = x.reshape(batch * seq, hidden)
        for layer in self.layers:
            h = layer(h)
        return h.reshape(batch, seq, hidden)


def fold_batch_norms(model: nn.Module) -> nn.Module:
    """Fold every Conv2d -> BatchNorm2d pair into the convolution (inference only), with torch's own
    ``fuse_conv_bn_eval``; what torch.fx cannot trace is returned unchanged (Relax then decomposes BN)."""
    from torch.fx.experimental.optimization import fuse

    try:
        return fuse(model.eval(), inplace=False)
    except Exception:  # noqa: BLE001 - untraceable control flow: keep BN, DecomposeOpsForInference handles it
        return model


def resnet18(seed: int = 0, batch: int = 1) -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    """ResNet-18 with seeded weights and BN statistics, BN folded; and a seeded example input."""
    return _resnet((2, 2, 2, 2), seed, batch)


def resnet34(seed: int = 0, batch: int = 1) -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    """ResNet-34 as ``resnet18``."""
    return _resnet((3, 4, 6, 3), seed, batch)


def _resnet(depths: tuple[int, ...], seed: int, batch: int) -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    torch.manual_seed(seed)
    model = ResNet(depths).eval()
    for m in model.modules():  # non-trivial BN statistics, so folding matters
        if isinstance(m, nn.BatchNorm2d) and m.running_mean is not None and m.running_var is not None:
            m.running_mean.uniform_(-0.1, 0.1)
            m.running_var.uniform_(0.5, 1.5)
            m.weight.data.uniform_(0.5, 1.5)
            m.bias.data.uniform_(-0.1, 0.1)
    return fold_batch_norms(model), (torch.randn(batch, 3, 224, 224),)


def bert_base(seed: int = 0, seq: int = 128, layers: int = 12) -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    """BERT-base encoder (12 x [hidden 768, 12 heads, FFN 3072]) with seeded N(0, 0.02) weights."""
    return _bert(seed, seq, layers, 768, 12, 3072)


def bert_large(seed: int = 0, seq: int = 128, layers: int = 24) -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    """BERT-large encoder (24 x [hidden 1024, 16 heads, FFN 4096]) as ``bert_base``: no GEMM shape in common with it."""
    return _bert(seed, seq, layers, 1024, 16, 4096)


def _bert(seed: int, seq: int, *shape: int) -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    torch.manual_seed(seed)
    model = BertEncoder(*shape).eval()
    for p in model.parameters():
        if p.dim() == 2:
            nn.init.normal_(p, std=0.02)
    return model, (torch.randn(1, seq, shape[1]),)


@dataclass(frozen=True)
class BuiltinModel:
    name: str
    description: str


BUILTIN_MODELS = {
    "resnet18": BuiltinModel("resnet18", "ResNet-18, batch 1, 3x224x224, BN folded"),
    "resnet34": BuiltinModel("resnet34", "ResNet-34, batch 1, 3x224x224, BN folded"),
    "bert-base": BuiltinModel("bert-base", "BERT-base encoder, 12 layers, hidden 768, 12 heads, FFN 3072, seq 128"),
    "bert-large": BuiltinModel("bert-large", "BERT-large encoder, 24 layers, hidden 1024, 16 heads, FFN 4096, seq 128"),
}


def builtin_model(name: str, seed: int = 0) -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    """A built-in model and its example inputs by name (one of ``BUILTIN_MODELS``)."""
    makers: dict[str, Callable[[int], tuple[nn.Module, tuple[torch.Tensor, ...]]]] = {
        "resnet18": resnet18, "resnet34": resnet34, "bert-base": bert_base, "bert-large": bert_large
    }  # fmt: skip
    if name in makers:
        return makers[name](seed)
    raise ValueError(f"unknown built-in model {name!r}: choose from {', '.join(BUILTIN_MODELS)}")
