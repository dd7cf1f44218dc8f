"""Device limits: what a kernel may ask of its device (AutoTVM's runner-to-builder handshake), from the runner's real
device or a named profile (``--device-profile h100``), so builders reject an invalid config before compiling it.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

__all__ = ["DeviceLimits", "PROFILES", "ARCH_PROFILES", "profile", "limits_of_tvm_device", "limits_for_target"]


@dataclass(frozen=True)
class DeviceLimits:
    """Per-block limits of a GPU (a CPU has none that a schedule can break)."""

    name: str
    max_threads_per_block: int
    max_shared_memory_per_block: int  # bytes
    max_registers_per_block: int
    warp_size: int
    max_thread_x: int = 1024
    max_thread_y: int = 1024
    max_thread_z: int = 64
    multi_processor_count: int = 0
    max_registers_per_thread: int = 255  # every compute capability since 3.5

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    def verify_gpu_code_kwargs(self) -> dict[str, int]:
        """Arguments of TVM's ``verify_gpu_code`` pass."""
        return {
            "max_threads_per_block": self.max_threads_per_block,
            "max_shared_memory_per_block": self.max_shared_memory_per_block,
            "max_thread_x": self.max_thread_x,
            "max_thread_y": self.max_thread_y,
            "max_thread_z": self.max_thread_z,
        }


# Published per-block limits of each architecture (CUDA programming guide, compute capability tables).
PROFILES: dict[str, DeviceLimits] = {
    "h100": DeviceLimits("h100", 1024, 48 * 1024, 65536, 32, multi_processor_count=132),
    "h200": DeviceLimits("h200", 1024, 48 * 1024, 65536, 32, multi_processor_count=132),
    "a100": DeviceLimits("a100", 1024, 48 * 1024, 65536, 32, multi_processor_count=108),
    "v100": DeviceLimits("v100", 1024, 48 * 1024, 65536, 32, multi_processor_count=80),
    "t4": DeviceLimits("t4", 1024, 48 * 1024, 65536, 32, multi_processor_count=40),
}


#: the profile of each compute capability a target names as ``arch`` (its per-block limits are the architecture's)
ARCH_PROFILES = {"sm_70": "v100", "sm_75": "t4", "sm_80": "a100", "sm_90": "h100"}


def profile(name: str) -> DeviceLimits:
    """The named device profile (``ValueError`` listing the known ones otherwise)."""
    try:
        return PROFILES[name.lower()]
    except KeyError:
        raise ValueError(f"unknown device profile {name!r}: choose from {', '.join(sorted(PROFILES))}") from None


def limits_of_tvm_device(dev: Any) -> DeviceLimits:
    """Limits read from a live TVM device (``tvm.cuda(0)``)."""
    return DeviceLimits(
        str(dev.device_name),
        int(dev.max_threads_per_block),
        int(dev.max_shared_memory_per_block),
        int(getattr(dev, "max_registers_per_block", 65536) or 65536),
        int(dev.warp_size),
        multi_processor_count=int(getattr(dev, "multi_processor_count", 0) or 0),
    )


def limits_for_target(target: Any, live_device: Any = None) -> DeviceLimits:
    """A GPU target's limits: the live device's when there is one, else the profile of the architecture the
    target names (``arch``, e.g. ``sm_80``); ``ValueError`` saying what to pass when neither is known."""
    if live_device is not None and getattr(live_device, "exist", False):
        return limits_of_tvm_device(live_device)
    arch = str(target.attrs.get("arch", "")) if hasattr(target, "attrs") else ""
    if arch in ARCH_PROFILES:
        return PROFILES[ARCH_PROFILES[arch]]
    raise ValueError(
        f"no GPU here and target {target} names no known architecture (arch one of {', '.join(ARCH_PROFILES)}): "
        "pass a device profile, e.g. adatune.measure.device_limits.profile('a100')"
    )
