"""Config spaces: knobs (split, reorder, annotate, other) and AutoTVM-style mixed-radix indexing."""
from ._config import ConfigEntity, ConfigSpace, FallbackConfig
from ._knobs import (AnnotateEntity, AnnotateSpace, KnobSpace, OtherOptionEntity, OtherOptionSpace,
                     ReorderEntity, ReorderSpace, SplitEntity, SplitSpace, extent_of)

__all__ = [
    "ConfigSpace", "ConfigEntity", "FallbackConfig", "KnobSpace", "SplitSpace", "ReorderSpace",
    "AnnotateSpace", "OtherOptionSpace", "SplitEntity", "ReorderEntity", "AnnotateEntity",
    "OtherOptionEntity", "extent_of",
]
