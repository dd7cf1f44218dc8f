"""Three small PyTorch models outside the zoo, built in-process (no downloads), for tests/test_models_beyond_zoo.py.

``SMALL_MODELS`` maps a name to the module class and its input shape."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

__all__ = ["SMALL_MODELS", "DepthwiseSeparable", "PoolConcatResidual", "TransformerBlock"]


class DepthwiseSeparable(nn.Module):
    """MobileNet-style: a stem, a depthwise 3x3 and a pointwise 1x1 convolution, global pooling, a classifier."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, 16, 3, 2, 1)
        self.dw = nn.Conv2d(16, 16, 3, 1, 1, groups=16)
        self.pw = nn.Conv2d(16, 32, 1)
        self.fc = nn.Linear(32, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.relu(self.stem(x))
        x = F.relu(self.pw(F.relu(self.dw(x))))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


class TransformerBlock(nn.Module):
    """Pre-norm attention and GELU FFN with residuals: layer norm, softmax, batched matmuls, dense layers."""

    def __init__(self, d: int = 32, heads: int = 2) -> None:
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.out = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.ff1, self.ff2 = nn.Linear(d, 2 * d), nn.Linear(2 * d, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        t, d = x.shape[1], x.shape[2]
        q, k, v = self.qkv(self.ln1(x)).reshape(1, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        att = torch.softmax(q @ k.transpose(-1, -2) / (d // self.heads) ** 0.5, dim=-1)
        x = x + self.out((att @ v).transpose(1, 2).reshape(1, t, d))
        return x + self.ff2(F.gelu(self.ff1(self.ln2(x))))


class PoolConcatResidual(nn.Module):
    """Max pooling, two branches concatenated, a residual add, average pooling and a classifier."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, 16, 3, 1, 1)
        self.a = nn.Conv2d(16, 8, 1)
        self.b = nn.Conv2d(16, 8, 3, 1, 1)
        self.fc = nn.Linear(16, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.max_pool2d(F.relu(self.stem(x)), 2)
        x = x + torch.cat([F.relu(self.a(x)), F.relu(self.b(x))], dim=1)
        return self.fc(torch.flatten(F.avg_pool2d(x, 8), 1))


SMALL_MODELS: dict[str, tuple[type[nn.Module], tuple[int, ...]]] = {
    "depthwise-separable": (DepthwiseSeparable, (1, 3, 16, 16)),
    "transformer-block": (TransformerBlock, (1, 12, 32)),
    "pool-concat-residual": (PoolConcatResidual, (1, 3, 16, 16)),
}
