"""Shape-generic micro-kernel spaces: tiles chosen from what the hardware offers, never from T's factors.

A micro-kernel is a GEMM tile ``mt x nt`` reduced ``kt`` at a time, made of ``mr x nr`` register tiles; since T
varies, tiles need not divide it (the schedule pads each tile locally).

- x86: ``mr x nr`` is a register-blocked accumulator tile that fits the register file with enough FMA chains
  (``codegen.x86.register_tiles``); ``mt``, ``nt`` are small multiples whose panels fit L2. ``bmm_nt`` (T both rows
  and columns) adds one-vector and narrower tiles for small T, and fields whose gain depends on T and the tile, for
  the search and each T's vote to choose: ``pack``, ``crop`` and ``unroll``.
- CUDA: a thread block of ``(mt / mr) x (nt / nr)`` threads (a multiple of the warp), each accumulating
  ``mr x nr`` outputs in registers, its operand tiles staged in shared memory.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import tvm

from ..codegen.x86 import FMA_CHAINS, fits_registers, register_tiles
from ..measure.device_limits import DeviceLimits, limits_for_target, profile
from ..space._candidate import CandidateSpace
from ..target import CpuInfo, cpu_info
from ..target import create as create_target

__all__ = [
    "CROP_TILE",
    "PACK_COLUMN",
    "UNROLL_STEPS",
    "MicroKernel",
    "MicroKernelSpace",
    "SM80_LIMITS",
    "SMEM_LAYOUTS",
    "DEFAULT_SMEM",
    "device_of",
    "weight_panel",
]

PACK_COLUMN = "column"
CROP_TILE = "tile"
_CROP_SUFFIX = "crop-tile"  # the key's suffix for crop="tile" (a bare "tile" would read as a tile size)
#: auto-unroll steps an x86 micro-kernel may ask for (0: none); the key's suffix is ``unroll<step>``
UNROLL_STEPS = (0, 64)
#: CUDA split-K: blocks sharing a kernel's reduction (1 = none), as a GEMM at small T has too few output tiles for a GPU
SPLIT_K = (1, 2, 4, 8, 16, 32)
#: the parts a CUDA space offers by default (each kernel in every one that divides its reduction into kt-steps)
DEFAULT_SPLIT_K = SPLIT_K
#: CUDA ``bmm_nt``: how a kernel stores B's tile in shared memory. ``""``: as global memory holds it, reduction
#: innermost, so a warp reading one k-slice hits one bank ``32 / gcd(nr * kt, 32)`` times over; ``"kmajor"``:
#: transposed, k outermost, so a warp reads neighbouring words; ``"kmajor-pad"``: transposed with each k-row padded 4
#: words past a multiple of 16, so the transposing stores also spread over the banks while rows stay 16-byte aligned.
#: Only there: A's tile (and B of dense and bmm NN) is read across its rows by a warp.
SMEM_LAYOUTS = ("", "kmajor", "kmajor-pad")
#: the layout a CUDA ``bmm_nt`` space offers by default: the padded k-major tile gave BERT's scores their best kernel at
#: every T timed, so it replaces the as-read tile rather than doubling the space
DEFAULT_SMEM = ("kmajor-pad",)


def device_of(target: tvm.target.Target) -> Any:
    """The TVM device a target's kernels run on (``tvm.cpu(0)`` for llvm, ``tvm.cuda(0)`` for cuda)."""
    kind = str(target.kind.name)
    if kind == "llvm":
        return tvm.cpu(0)
    if kind == "cuda":
        return tvm.cuda(0)
    raise ValueError(f"DietCode runs on llvm (x86) or cuda targets, got {kind!r}")


@dataclass(frozen=True)
class MicroKernel:
    """One micro-kernel: output tile ``mt x nt``, reduction step ``kt``, per-thread/register tile ``mr x nr``."""

    device: str  # "cpu" or "cuda"
    mt: int
    nt: int
    kt: int
    mr: int
    nr: int
    pack: str = ""  # x86 bmm_nt: "" packs B once per call, "column" inside each column tile (see the module doc)
    crop: str = ""  # x86 bmm_nt: "" crops the padded output once per call, "tile" inside each tile
    unroll: int = 0  # x86: TVM's auto-unroll step for the whole kernel (0: loops as scheduled)
    split_k: int = 1  # CUDA: blocks sharing the reduction, summed by a second kernel (``SPLIT_K``)
    interleave: bool = False  # CUDA: a thread's rows and columns a thread-tile apart, not adjacent (see below)
    smem: str = ""  # CUDA bmm_nt: the shared-memory layout of B's tile (``SMEM_LAYOUTS``)

    def __post_init__(self) -> None:
        if self.pack not in ("", PACK_COLUMN) or self.crop not in ("", CROP_TILE):
            raise ValueError(
                f"a micro-kernel packs B with pack='' or {PACK_COLUMN!r} and crops with crop='' or {CROP_TILE!r}, "
                f"got pack={self.pack!r}, crop={self.crop!r}"
            )
        if isinstance(self.unroll, bool) or self.unroll not in UNROLL_STEPS:
            raise ValueError(f"a micro-kernel unrolls with a step in {UNROLL_STEPS}, got unroll={self.unroll!r}")
        if not isinstance(self.interleave, bool):
            raise ValueError(f"a micro-kernel interleaves its threads or not (a bool), got {self.interleave!r}")
        if isinstance(self.split_k, bool) or self.split_k not in SPLIT_K:
            raise ValueError(f"a micro-kernel splits its reduction into one of {SPLIT_K} parts, got {self.split_k!r}")
        if self.smem not in SMEM_LAYOUTS:
            raise ValueError(f"a micro-kernel lays out its shared tiles as one of {SMEM_LAYOUTS}, got {self.smem!r}")

    @property
    def key(self) -> str:
        suffix = (
            (f"/{self.pack}" if self.pack else "")
            + (f"/{_CROP_SUFFIX}" if self.crop == CROP_TILE else "")
            + (f"/unroll{self.unroll}" if self.unroll else "")
            + (f"/splitk{self.split_k}" if self.split_k > 1 else "")
            + ("/interleave" if self.interleave else "")
            + (f"/{self.smem}" if self.smem else "")
        )
        return f"{self.device}:{self.mt}x{self.nt}x{self.kt}/{self.mr}x{self.nr}{suffix}"

    def to_json(self) -> dict[str, Any]:
        return (
            {
                "kind": "microkernel",
                "device": self.device,
                "mt": self.mt,
                "nt": self.nt,
                "kt": self.kt,
                "mr": self.mr,
                "nr": self.nr,
            }
            | ({"pack": self.pack} if self.pack else {})
            | ({"crop": self.crop} if self.crop else {})
            | ({"unroll": self.unroll} if self.unroll else {})
            | ({"split_k": self.split_k} if self.split_k > 1 else {})
            | ({"interleave": True} if self.interleave else {})
            | ({"smem": self.smem} if self.smem else {})
        )

    @classmethod
    def from_key(cls, key: str) -> MicroKernel:
        """The micro-kernel ``key`` names (``cpu:64x96x4/8x32/column/crop-tile/unroll64``), in a space or not."""
        bad = (
            f"not a micro-kernel key: {key!r} (e.g. cpu:64x96x4/8x32, cpu:8x8x1/8x4/column/crop-tile/unroll64, "
            "cuda:32x64x16/4x4/splitk4/interleave/kmajor)"
        )
        try:
            device, rest = key.split(":")
            tile, reg, *options = rest.split("/")
            smem = options[-1] if options[-1:] and options[-1] in SMEM_LAYOUTS else ""
            options = options[:-1] if smem else options
            interleave = options[-1:] == ["interleave"]
            options = options[:-1] if interleave else options
            mt, nt, kt = (int(x) for x in tile.split("x"))
            mr, nr = (int(x) for x in reg.split("x"))
            split_k = int(options.pop()[len("splitk") :]) if options[-1:] and options[-1].startswith("splitk") else 1
            unroll = int(options.pop()[len("unroll") :]) if options[-1:] and options[-1].startswith("unroll") else 0
        except ValueError as err:
            raise ValueError(bad) from err
        crop = CROP_TILE if options[-1:] == [_CROP_SUFFIX] else ""
        pack = options[:-1] if crop else options
        if pack not in ([], [PACK_COLUMN]):
            raise ValueError(bad)
        return cls(device, mt, nt, kt, mr, nr, pack[0] if pack else "", crop, unroll, split_k, interleave, smem)

    @property
    def threads(self) -> int:
        """Threads per block (CUDA) or register tiles per tile (x86)."""
        return (self.mt // self.mr) * (self.nt // self.nr)

    def __str__(self) -> str:
        return self.key


#: A100 (sm_80) limits, the profile a CUDA space takes when its target says ``arch=sm_80`` and no GPU is here
SM80_LIMITS = profile("a100")


def _register_tiles(info: CpuInfo) -> set[tuple[int, int]]:
    """(rows, vectors) accumulator tiles of the x86 micro-kernels."""
    return register_tiles(range(1, info.vector_registers - 1), range(1, 5), info)


def _one_vector_tiles(info: CpuInfo) -> set[tuple[int, int]]:
    """(rows, 1) accumulator tiles with ``FMA_CHAINS`` rows or more, for GEMMs whose columns are T (``bmm_nt``):
    ``register_tiles`` drops them (a k step loads one broadcast per FMA), but a T axis pads to the register tile's
    width, so a one-vector tile wastes less between multiples; the measured votes decide per host."""
    return {(rows, 1) for rows in range(FMA_CHAINS, info.vector_registers) if fits_registers(rows, 1, info)}


def weight_panel(target: Any, dtype: str, n: int) -> int:
    """Panel width of ``target``'s packed dense weights of ``n`` columns (0 off x86 or where it does not divide ``n``):
    one SIMD vector, so one layout serves all kernels and a ``v``-vector tile reads ``v`` adjacent panels per k step."""
    tgt = create_target(target)
    if str(tgt.kind.name) != "llvm":
        return 0  # CUDA kernels stage B through shared memory from its row-major layout
    width = cpu_info(tgt).lanes(dtype)
    return width if n % width == 0 else 0


def _cpu_kernels(
    info: CpuInfo, dtype: str, static_k: int | None, tiles: set[tuple[int, int]], lanes: int | None = None
) -> list[MicroKernel]:
    """``tiles``: (rows, vectors) register tiles; ``lanes``: a vector's width (default the target's SIMD width)."""
    lanes = lanes or info.lanes(dtype)
    nbytes = tvm.DataType(dtype).bits // 8
    out = []
    # tiles up to 128 rows and 3 or 6 register tiles wide: wide tiles (64x96 of 8x32 registers) win on large GEMMs
    for (mr, vecs), a, b, kt in itertools.product(sorted(tiles), (1, 2, 4, 8, 16), (1, 2, 3, 4, 6), (1, 2, 4, 8)):
        nr = vecs * lanes
        mt, nt = mr * a, nr * b
        if mt > 128 or nt > 256 or not fits_registers(mr, vecs, info):
            continue
        depth = static_k if static_k is not None else 512  # reduction extent of one tile's panels
        if (mt + nt) * depth * nbytes > info.l2_bytes:  # A and B panels of one tile stay in L2
            continue
        out.append(MicroKernel("cpu", mt, nt, kt, mr, nr))
    return out


def _half_vector_kernels(info: CpuInfo, dtype: str, static_k: int | None) -> list[MicroKernel]:
    """Register tiles of half a vector for GEMMs whose columns are T (``bmm_nt``), with the one-vector tiles' rows; none
    where half a vector is narrower than 8 lanes. They pad T less; a core that splits 512-bit FMAs in halves loses
    nothing on them, one with full 512-bit FMA units halves its throughput, so the votes decide per host."""
    half = info.lanes(dtype) // 2
    if half < 8:
        return []
    return _cpu_kernels(info, dtype, static_k, _one_vector_tiles(info), lanes=half)


def _small_kernels(info: CpuInfo, dtype: str) -> list[MicroKernel]:
    """Tiles narrower than a vector for GEMMs whose columns are T too (``bmm_nt``): at T = 1 a full-vector tile pads
    the work 128-fold on AVX-512. Latency-bound, so only the search's pick at small T."""
    lanes = info.lanes(dtype)
    widths = sorted({w for w in (1, 2, 4, lanes // 2) if 1 <= w < lanes})
    return [
        MicroKernel("cpu", mr * a, nr * b, kt, mr, nr)
        for nr, mr, a, b, kt in itertools.product(widths, (1, 2, 4, 8), (1, 2), (1, 2), (1, 4, 8))
    ]


def _cuda_kernels(limits: DeviceLimits, dtype: str) -> list[MicroKernel]:
    nbytes = tvm.DataType(dtype).bits // 8
    out = []
    for mr, nr, ty, tx, kt in itertools.product(
        (1, 2, 4, 8), (1, 2, 4, 8), (2, 4, 8, 16, 32), (4, 8, 16, 32), (4, 8, 16, 32)
    ):
        threads = ty * tx
        if threads % limits.warp_size or threads > limits.max_threads_per_block or threads < 64:
            continue
        if mr * nr + mr + nr + 24 > limits.max_registers_per_thread // 2:  # accumulators + operands + addressing
            continue
        mt, nt = mr * ty, nr * tx
        if mt > 128 or nt > 128 or (mt + nt) * kt * nbytes > limits.max_shared_memory_per_block:
            continue
        out.append(MicroKernel("cuda", mt, nt, kt, mr, nr))
    return out


def _split_k_kernels(
    kernels: Sequence[MicroKernel], split_k: Sequence[int], static_k: int | None, kind: str | None
) -> list[MicroKernel]:
    """Each CUDA kernel with its reduction split into each of ``split_k`` parts (>1) that are whole ``kt`` steps
    of ``static_k`` (a reduction over T, ``bmm_nn``, does not split)."""
    parts = sorted({int(s) for s in split_k} - {1})
    bad = [s for s in split_k if isinstance(s, bool) or s not in SPLIT_K]
    if bad:
        raise ValueError(f"split_k takes parts from {SPLIT_K}, got {list(split_k)}")
    if not parts:
        return []
    if static_k is None or kind == "bmm_nn":
        raise ValueError(f"split-K needs a fixed reduction depth (static_k) and a kind other than bmm_nn, got "
                         f"static_k={static_k}, kind={kind!r}")  # fmt: skip
    return [dataclasses.replace(k, split_k=s) for s in parts for k in kernels if static_k % (s * k.kt) == 0]


class MicroKernelSpace(CandidateSpace):
    """The micro-kernels of one target and GEMM kind (no dependence on T beyond the workload's static dims).

    A CUDA space fits ``device_limits`` (else the live device's, else the profile of the target's ``arch``).
    ``split_k`` (CUDA): the parts a kernel may split its reduction into (default ``DEFAULT_SPLIT_K`` where the reduction
    is fixed, ``(1,)`` for none). ``interleave``: whether threads also take rows and columns a thread-tile apart (off by
    default: a small gain for twice the space). ``smem`` (CUDA ``bmm_nt``): the layouts of B's shared tile (None:
    ``DEFAULT_SMEM``; other kinds take ``("",)``)."""

    kind: ClassVar[str] = "microkernel"
    FEATURE_NAMES: ClassVar[tuple[str, ...]] = (
        "log2_mt",
        "log2_nt",
        "log2_kt",
        "log2_mr",
        "log2_nr",
        "log2_threads",
        "log2_tile_elems",
        "log2_reg_elems",
        "arith_intensity",
        "reg_intensity",
        "log2_panel_bytes",
        "panel_over_cache",
        "pack_column",
        "crop_tile",
        "log2_unroll",
        "log2_split_k",
        "interleave",
        "smem_kmajor",
        "smem_pad",
    )

    def __init__(
        self,
        target: tvm.target.Target,
        dtype: str = "float32",
        static_k: int | None = None,
        device_limits: DeviceLimits | None = None,
        kind: str | None = None,
        split_k: Sequence[int] | None = None,
        interleave: Sequence[bool] = (False,),
        smem: Sequence[str] | None = None,
    ):
        self.target = target
        self.dtype = dtype
        self.device = "cuda" if target.kind.name == "cuda" else "cpu"
        if self.device == "cpu":
            if set(split_k or (1,)) != {1} or True in interleave or set(smem or ("",)) != {""}:
                raise ValueError(
                    "split_k, interleave and smem are CUDA options; an x86 space takes split_k=(1,), "
                    f"interleave=(False,) and smem=('',); got split_k={split_k!r}, interleave={interleave!r}, "
                    f"smem={smem!r}"
                )
            self.info: CpuInfo | None = cpu_info(target)
            self.device_limits: DeviceLimits | None = None
            tiles = _register_tiles(self.info)
            if kind == "bmm_nt":
                tiles |= _one_vector_tiles(self.info)
            self.kernels = _cpu_kernels(self.info, dtype, static_k, tiles)
            if kind == "bmm_nt":
                extra = _half_vector_kernels(self.info, dtype, static_k) + _small_kernels(self.info, dtype)
                self.kernels += list({k.key: k for k in extra}.values())  # a small tile may be a half-vector one
                # a one-column register tile reads B's rows as they lie (k-major already): nothing to pack per
                # column tile, and TVM 0.27 fails to build those kernels where the tile holds several columns
                self.kernels += [dataclasses.replace(k, pack=PACK_COLUMN) for k in self.kernels if k.nr > 1]
                self.kernels += [dataclasses.replace(k, crop=CROP_TILE) for k in self.kernels]
                self.kernels += [dataclasses.replace(k, unroll=UNROLL_STEPS[-1]) for k in self.kernels]
            self.cores = self.info.cores
            self.cache_bytes = self.info.l2_bytes
        else:
            self.info = None
            limits = device_limits or limits_for_target(target, tvm.cuda(0))
            self.device_limits = limits
            self.kernels = _cuda_kernels(limits, dtype)
            if split_k is None:  # every split where the reduction is fixed and known
                split_k = DEFAULT_SPLIT_K if static_k is not None and kind in ("dense", "bmm_nt") else (1,)
            self.kernels += _split_k_kernels(self.kernels, split_k, static_k, kind)
            if True in interleave:
                plain = list(self.kernels) if False in interleave else []
                self.kernels = plain + [dataclasses.replace(k, interleave=True) for k in self.kernels]
            if smem is None:
                smem = DEFAULT_SMEM if kind == "bmm_nt" else ("",)
            bad = [m for m in smem if m not in SMEM_LAYOUTS]
            if bad or not smem:
                raise ValueError(f"smem takes shared-memory layouts from {SMEM_LAYOUTS}, got {list(smem)}")
            if set(smem) != {""} and kind != "bmm_nt":
                raise ValueError(f"smem layouts other than '' apply to bmm_nt only (B read along its reduction), "
                                 f"got smem={list(smem)} for kind={kind!r}")  # fmt: skip
            self.kernels = [dataclasses.replace(k, smem=m) for m in dict.fromkeys(smem) for k in self.kernels]
            self.cores = limits.multi_processor_count
            self.cache_bytes = limits.max_shared_memory_per_block
        if not self.kernels:
            raise ValueError(f"no micro-kernel fits target {target} (dtype {dtype})")
        self._by_key = {k.key: k for k in self.kernels}
        self._order = {k.key: i for i, k in enumerate(self.kernels)}
        self._neighbours: dict[tuple[int, tuple[Any, ...]], list[MicroKernel]] = {}
        for k in self.kernels:  # kernels that differ in field i only share the key (i, the other fields)
            values = self._fields(k)
            for i in range(len(values)):
                self._neighbours.setdefault((i, values[:i] + values[i + 1 :]), []).append(k)

    _MUTABLE: ClassVar[tuple[str, ...]] = (
        "mt", "nt", "kt", "mr", "nr", "pack", "crop", "unroll", "split_k", "interleave", "smem"
    )  # fmt: skip

    @classmethod
    def _fields(cls, k: MicroKernel) -> tuple[Any, ...]:
        return tuple(getattr(k, f) for f in cls._MUTABLE)

    @property
    def size(self) -> int:
        return len(self.kernels)

    def __contains__(self, key: str) -> bool:
        return key in self._by_key

    def get(self, key: str) -> MicroKernel:
        if key not in self._by_key:
            raise ValueError(f"micro-kernel {key!r} is not in this {self.device} space")
        return self._by_key[key]

    def random_candidates(self, rng: np.random.Generator, n: int, exclude: Collection[str] = ()) -> list[Any]:
        taken = set(exclude)
        pool = [k for k in self.kernels if k.key not in taken]
        if not pool:
            return []
        idx = rng.choice(len(pool), size=min(n, len(pool)), replace=False)
        return [pool[int(i)] for i in idx]

    def mutate(self, candidates: Sequence[Any], rng: np.random.Generator) -> list[Any]:
        """A neighbour differs from its origin in one field (a tile, step, packing, crop, unroll, ...)."""
        out = []
        for cand in candidates:
            values = self._fields(cand)
            neighbours = [
                k
                for i in range(len(values))
                for k in self._neighbours.get((i, values[:i] + values[i + 1 :]), [])
                if k.key != cand.key
            ]  # in the order of the space, as a scan of it would give them, so a seed picks the same neighbour
            neighbours.sort(key=lambda k: self._order[k.key])
            out.append(neighbours[int(rng.integers(len(neighbours)))] if neighbours else cand)
        return out

    def featurize(self, candidates: Sequence[Any]) -> np.ndarray:
        """Shape-free features of the micro-kernel itself (what the paper's f_MK sees)."""
        nbytes = tvm.DataType(self.dtype).bits // 8
        rows = []
        for k in candidates:
            panel = (k.mt + k.nt) * k.kt * nbytes
            rows.append(
                [
                    math.log2(k.mt),
                    math.log2(k.nt),
                    math.log2(k.kt),
                    math.log2(k.mr),
                    math.log2(k.nr),
                    math.log2(k.threads),
                    math.log2(k.mt * k.nt),
                    math.log2(k.mr * k.nr),
                    k.mt * k.nt / (k.mt + k.nt),
                    k.mr * k.nr / (k.mr + k.nr),
                    math.log2(panel),
                    panel / self.cache_bytes,
                    float(k.pack == PACK_COLUMN),
                    float(k.crop == CROP_TILE),
                    math.log2(1 + k.unroll),
                    math.log2(k.split_k),
                    float(k.interleave),
                    float(k.smem.startswith("kmajor")),
                    float(k.smem == "kmajor-pad"),
                ]
            )
        return np.asarray(rows, dtype=np.float32).reshape(len(rows), len(self.FEATURE_NAMES))

    def decode(self, data: dict[str, Any]) -> MicroKernel:
        if not isinstance(data, dict) or data.get("kind") != "microkernel":
            raise ValueError(f"not a micro-kernel record: {data!r}")
        try:
            k = MicroKernel(
                str(data["device"]), int(data["mt"]), int(data["nt"]), int(data["kt"]), int(data["mr"]),
                int(data["nr"]), str(data.get("pack", "")), str(data.get("crop", "")), int(data.get("unroll", 0)),
                int(data.get("split_k", 1)), bool(data.get("interleave", False)), str(data.get("smem", "")),
            )  # fmt: skip
        except (KeyError, TypeError, ValueError) as err:
            raise ValueError(f"malformed micro-kernel record {data!r}: {err}") from err
        return self.get(k.key)
