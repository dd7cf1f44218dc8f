"""Search spaces: the candidate protocol, and AutoTVM-style knob config spaces (split, reorder, annotate,
other) with mixed-radix indexing and multi-filters."""

from ._candidate import Candidate, CandidateSpace, DiscreteSpace
from ._config import ConfigEntity, ConfigSpace, FallbackConfig, FallbackConfigEntity, InstantiationError
from ._knobs import (
    AnnotateEntity,
    AnnotateSpace,
    KnobSpace,
    OtherOptionEntity,
    OtherOptionSpace,
    ReorderEntity,
    ReorderSpace,
    SplitEntity,
    SplitSpace,
    VirtualAxis,
    extent_of,
)

__all__ = [
    "Candidate",
    "CandidateSpace",
    "DiscreteSpace",
    "ConfigSpace",
    "ConfigEntity",
    "FallbackConfig",
    "FallbackConfigEntity",
    "InstantiationError",
    "KnobSpace",
    "SplitSpace",
    "ReorderSpace",
    "AnnotateSpace",
    "OtherOptionSpace",
    "SplitEntity",
    "ReorderEntity",
    "AnnotateEntity",
    "OtherOptionEntity",
    "VirtualAxis",
    "extent_of",
]
