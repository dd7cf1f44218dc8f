"""The K-block probe's two loop nests (whole K, blocks of K) compute the GEMM: checked against numpy on a small
shape (nothing timed)."""

from __future__ import annotations

import numpy as np
import pytest
import tvm

import adatune
from benchmarks.models.k_block_probe import NR, gemm, schedule


@pytest.mark.parametrize("kc", [64, 16], ids=["whole-k", "blocks"])
def test_both_loop_nests_match_numpy(kc: int) -> None:
    m, k, n = 8, 64, 2 * NR
    lib = tvm.compile(schedule(gemm(m, k, n), [1, 2, 4], [1, 2, NR], k, kc, 8).mod, target=adatune.target.host())
    rng = np.random.default_rng(0)
    a = rng.uniform(-1, 1, (m, k)).astype("float32")
    bp = rng.uniform(-1, 1, (n // NR, k, NR)).astype("float32")
    out = tvm.runtime.tensor(np.zeros((m, n), "float32"), tvm.cpu())
    lib(tvm.runtime.tensor(a, tvm.cpu()), tvm.runtime.tensor(bp, tvm.cpu()), out)
    np.testing.assert_allclose(out.numpy(), a @ bp.transpose(1, 0, 2).reshape(k, n), rtol=1e-4, atol=1e-4)
