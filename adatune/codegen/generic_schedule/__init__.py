"""A shape-generic CPU schedule for any legalised operator, tuned for nothing: what a dynamic model's operators
outside its GEMMs run, what ``am.build`` gives an untuned operator without a template, and the first program of
every CPU trace space (``adatune.trace``), so a trace search starts from it. Below ``trace`` in the layers: it
reads only TVM's TIR."""

from ._schedule import schedule_generic
from ._vector_tail import vectorise_tails

__all__ = ["schedule_generic", "vectorise_tails"]
