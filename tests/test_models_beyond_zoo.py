"""Models outside the zoo: three small PyTorch modules, built here (no downloads), with operator mixes the
templates do not cover alone (depthwise and pointwise convolutions; layer norm, GELU and softmax attention;
pooling, concatenation and residuals). Each is imported through Relax, tuned briefly (knob tasks by XGB, the
others by trace search), built from its log, and must match PyTorch."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

import adatune.models as am


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


CASES = {
    "depthwise-separable": (DepthwiseSeparable, (1, 3, 16, 16)),
    "transformer-block": (TransformerBlock, (1, 12, 32)),
    "pool-concat-residual": (PoolConcatResidual, (1, 3, 16, 16)),
}


@pytest.mark.parametrize("name", list(CASES))
def test_a_model_outside_the_zoo_tunes_builds_and_matches_pytorch(name: str, tmp_path) -> None:
    cls, shape = CASES[name]
    torch.manual_seed(0)
    net = cls().eval()
    model = am.from_torch(net, (torch.randn(*shape),), name=name)
    tasks = am.extract_tasks(model)
    kinds = {t.kind for t in tasks}
    assert "trace" in kinds and kinds - {"trace"}, f"{name}: expected template and trace tasks, got {kinds}"
    log = tmp_path / f"{name}.jsonl"
    summary = am.tune_model(model, log, n_trial=2 * len(tasks), strategy="round-robin", round_trials=2, progress=False)
    assert sum(summary.trials) > 0 and log.exists()
    compiled = am.build(model, log)
    assert "record" in compiled.applied.values()
    for seed in (1, 2):
        x = model.random_inputs(seed)
        np.testing.assert_allclose(compiled.run(*x)[0], model.reference(*x)[0], rtol=1e-4, atol=1e-4)


def test_fast_math_keeps_a_gelu_transformer_block_within_its_error_bound() -> None:
    """TVM's fast erf/exp replace the exact ones in GELU and softmax; the block's outputs stay within 1e-5 of
    PyTorch's (exact erf), and the erf itself within 2e-6 of scipy's over [-6, 6]."""
    import scipy.special
    import tvm
    from tvm import te, topi

    x = te.placeholder((4001,), "float32", name="x")
    f = tvm.tirx.build(te.create_prim_func([x, topi.fast_erf(x)]), "llvm")
    grid = np.linspace(-6, 6, 4001).astype("float32")
    out = tvm.runtime.tensor(np.zeros_like(grid))
    f(tvm.runtime.tensor(grid), out)
    assert np.max(np.abs(out.numpy() - scipy.special.erf(grid.astype("float64")))) < 2e-6
    torch.manual_seed(0)
    net = TransformerBlock().eval()
    exact = am.from_torch(net, (torch.randn(1, 12, 32),), name="exact")
    fast = am.from_torch(net, (torch.randn(1, 12, 32),), name="fast", fast_math=True)
    assert "erf" in exact.mod.script() and "erf" not in fast.mod.script().replace("fast_erf", "")
    compiled = am.build(fast, None)
    for seed in (1, 2):
        xs = fast.random_inputs(seed)
        np.testing.assert_allclose(compiled.run(*xs)[0], fast.reference(*xs)[0], rtol=0, atol=1e-5)
