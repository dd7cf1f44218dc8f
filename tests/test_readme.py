"""The README is run, not only read, so it cannot drift from the code.

Every ```python block runs as written in a fresh interpreter, from an empty directory, with adatune's own
DeprecationWarnings raised as errors, so an example on a deprecated name fails here rather than in a user's hands. A
block fenced ```python no-run (for hardware CI lacks) is compiled only. Every `adatune ...` line of a ```sh block
parses with the CLI's own parser, and every subcommand is shown. The page stays a page (at most 300 lines), its
links resolve, and docs/tuners.md holds the tuner table exactly as the registry generates it.
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
TUNERS_DOC = ROOT / "docs" / "tuners.md"
MAX_LINES = 300
BLOCK_TIMEOUT_S = 600  # a hung block fails on its own instead of stalling the suite

_FENCE = re.compile(r"^```([^\n]*)\n(.*?)^```[ \t]*$", re.MULTILINE | re.DOTALL)
_LINK = re.compile(r"\]\(([^)\s]+)\)")
_HEADING = re.compile(r"^#{1,6}[ \t]+(.+?)[ \t]*#*[ \t]*$", re.MULTILINE)

# Loaded by the block's interpreter (and its workers) before the block: only warnings that name adatune become errors.
_STRICT_DEPRECATIONS = (
    'import warnings\nwarnings.filterwarnings("error", message=r"(?s).*adatune", category=DeprecationWarning)\n'
)


@dataclass(frozen=True)
class Block:
    language: str
    flags: tuple[str, ...]  # words after the language on the fence line, e.g. ("no-run",)
    code: str
    line: int  # the README line of the opening fence


def fenced_blocks(text: str) -> list[Block]:
    blocks = []
    for m in _FENCE.finditer(text):
        words = m.group(1).split()
        language = words[0] if words else ""
        blocks.append(Block(language, tuple(words[1:]), m.group(2), text.count("\n", 0, m.start()) + 1))
    return blocks


def cli_lines(blocks: list[Block]) -> list[str]:
    lines = [line.strip() for b in blocks if b.language == "sh" for line in b.code.splitlines()]
    return [line for line in lines if line.startswith("adatune ")]


def github_anchor(heading: str) -> str:
    """The id GitHub gives a heading: lower case, punctuation but hyphens and underscores dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(markdown: str) -> set[str]:
    return {github_anchor(h) for h in _HEADING.findall(_FENCE.sub("", markdown))}


TEXT = README.read_text()
BLOCKS = fenced_blocks(TEXT)
PYTHON_BLOCKS = [b for b in BLOCKS if b.language == "python"]


@pytest.mark.parametrize("block", PYTHON_BLOCKS, ids=[f"line{b.line}" for b in PYTHON_BLOCKS])
def test_readme_python_block_runs_as_written(block: Block, tmp_path: Path) -> None:
    compile(block.code, f"README.md:{block.line}", "exec")
    if "no-run" in block.flags:
        return
    script = tmp_path / "readme_block.py"
    script.write_text(block.code)
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(_STRICT_DEPRECATIONS)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), str(site), env.get("PYTHONPATH", "")) if p)
    work = tmp_path / "work"
    work.mkdir()
    try:
        proc = subprocess.run(
            [sys.executable, str(script)], cwd=work, env=env, capture_output=True, text=True, timeout=BLOCK_TIMEOUT_S
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"README.md line {block.line}: still running after {BLOCK_TIMEOUT_S} s", pytrace=False)
    if proc.returncode:
        output = (proc.stdout + proc.stderr)[-6000:]
        pytest.fail(f"README.md line {block.line} failed (exit {proc.returncode}):\n{output}", pytrace=False)


def test_every_quickstart_has_a_python_block_that_runs() -> None:
    sections = re.split(r"^## ", TEXT, flags=re.MULTILINE)[1:]
    quickstarts = [s for s in sections if s.startswith("Quickstart")]
    assert len(quickstarts) >= 5, [s.splitlines()[0] for s in quickstarts]
    for section in quickstarts:
        runnable = [b for b in fenced_blocks(section) if b.language == "python" and "no-run" not in b.flags]
        assert runnable, f"quickstart {section.splitlines()[0]!r} has no runnable python block"


def _subcommands(parser: argparse.ArgumentParser) -> set[str]:
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return set(sub.choices)


CLI_LINES = cli_lines(BLOCKS)


@pytest.mark.parametrize("line", CLI_LINES)
def test_readme_cli_line_parses(line: str) -> None:
    from adatune.cli import build_parser

    argv = shlex.split(line, comments=True)[1:]
    build_parser().parse_args(argv)  # adatune's parser raises UsageError on any mistake


def test_readme_shows_every_cli_subcommand() -> None:
    from adatune.cli import build_parser

    shown = {shlex.split(line, comments=True)[1] for line in CLI_LINES}
    assert _subcommands(build_parser()) <= shown


def test_readme_is_a_page_with_the_two_commands() -> None:
    assert len(TEXT.splitlines()) <= MAX_LINES
    makefile = (ROOT / "Makefile").read_text()
    for target in ("demo", "test"):
        assert f"make {target}" in TEXT
        assert re.search(rf"^{target}:", makefile, re.MULTILINE), f"the Makefile has no {target} target"


@pytest.mark.parametrize("doc", [README, TUNERS_DOC], ids=lambda p: p.name)
def test_relative_links_resolve(doc: Path) -> None:
    broken = []
    prose = re.sub(r"`[^`\n]*`", "", _FENCE.sub("", doc.read_text()))  # code is not links: vm["main"](x)
    for target in _LINK.findall(prose):
        if re.match(r"[a-z]+:", target):  # http:, https:, mailto:
            continue
        path, _, anchor = target.partition("#")
        file = (doc.parent / path).resolve() if path else doc
        if not file.is_file():
            broken.append(target)
        elif anchor and anchor not in anchors(file.read_text()):
            broken.append(target)
    assert not broken, f"{doc.name}: links to no file or heading: {broken}"


def test_tuner_options_table_is_the_generated_one() -> None:
    """docs/tuners.md holds `python -m adatune.tuners.docs` verbatim, so the documented options cannot drift."""
    from adatune.tuners.docs import markdown_table

    assert markdown_table().strip() in TUNERS_DOC.read_text()
