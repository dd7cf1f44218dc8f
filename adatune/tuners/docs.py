"""The tuner table of docs/tuners.md and the CLI's help, generated from the registry so they cannot go stale.

``python -m adatune.tuners.docs`` (or ``adatune tuners --markdown``) prints the Markdown table.
"""

from __future__ import annotations

import sys

from ._registry import TunerOption, TunerSpec, tuner_specs

__all__ = ["markdown_table", "plain_text"]


def _default(opt: TunerOption) -> str:
    if opt.default is None:
        return "none"
    if isinstance(opt.default, bool):
        return str(opt.default).lower()
    if isinstance(opt.default, tuple):
        return ",".join(map(str, opt.default))
    return str(opt.default)


def _fixed(spec: TunerSpec) -> str:
    return ", ".join(f"{k}={v}" for k, v in spec.fixed_kwargs.items())


def _cell(text: str) -> str:
    """GitHub tables split cells on every ``|``, even inside code spans, unless it is escaped."""
    return text.replace("|", "\\|")


def markdown_table(specs: list[TunerSpec] | None = None) -> str:
    """One row per tuner option (``--option NAME=VALUE``), grouped by tuner; Python-only options are marked."""
    rows = ["| tuner | what it is | option | values | default | meaning |", "|---|---|---|---|---|---|"]
    for spec in specs if specs is not None else tuner_specs():
        summary = spec.summary + (f" (fixed: {_fixed(spec)})" if spec.fixed_kwargs else "")
        if not spec.options:
            rows.append(f"| `{spec.name}` | {summary} | | | | |")
        for i, opt in enumerate(spec.options):
            doc = opt.doc + ("" if opt.settable_from_text else " (Python only)")
            first = f"`{spec.name}` | {summary}" if i == 0 else " | "
            rows.append(
                f"| {first} | `{opt.name}` | `{_cell(opt.type_name())}` | `{_cell(_default(opt))}` | {_cell(doc)} |"
            )
    return "\n".join(rows) + "\n"


def plain_text(specs: list[TunerSpec] | None = None) -> str:
    """The tuners and their options as the CLI's help shows them."""
    lines = ["tuners and their options (--tuner NAME --option KEY=VALUE ...):"]
    for spec in specs if specs is not None else tuner_specs():
        fixed = f" [fixed: {_fixed(spec)}]" if spec.fixed_kwargs else ""
        lines.append(f"  {spec.name:10s} {spec.summary}{fixed}")
        for opt in spec.options:
            where = "" if opt.settable_from_text else " (Python only)"
            lines.append(f"      {opt.name}={opt.type_name()} (default {_default(opt)}): {opt.doc}{where}")
        if not spec.options:
            lines.append("      (no options)")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.stdout.write(markdown_table())
