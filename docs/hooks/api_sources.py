"""What the API reference needs from the source tree: a mkdocs hook and a griffe extension.

raftflow is installed through a package-dir mapping (``[tool.setuptools]`` of
pyproject.toml): the folders ``engine/``, ``transports/`` and ``stores/`` are installed as
``raftflow.engine``, ``raftflow.transports`` and ``raftflow.stores``. griffe, which reads
the sources for mkdocstrings, finds packages by folder, so before every build
:func:`on_config` lays the installed tree out as links in ``.docs-src/raftflow/``
(git-ignored), read from the mapping itself: mkdocs.yml gives mkdocstrings that folder.
Modules moved or split inside those folders need nothing here.

The docstrings are written in reStructuredText's habits, which Markdown does not know:
:class:`RstDocstrings` shows their roles (``:class:`Name```) as code, and their literal
blocks (a paragraph ending in ``::``) as code blocks.
"""

from __future__ import annotations

import os
import re
import shutil
import textwrap
from pathlib import Path
from typing import Any

import griffe
import tomllib
from mkdocs.plugins import event_priority

ROOT = Path(__file__).resolve().parents[2]
TREE = ROOT / ".docs-src"
ROLE = re.compile(r":(?:class|mod|func|meth|attr|exc|data|obj|const):`(~?)([^`]+)`")


def package_dirs(root: Path = ROOT) -> dict[str, Path]:
    """The installed package names and the folders they come from (pyproject.toml)."""
    setuptools = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]
    return {name: root / folder for name, folder in setuptools["package-dir"].items()}


def lay_out(target: Path = TREE, root: Path = ROOT) -> None:
    """``target/<package path>`` for every mapped package, as relative links."""
    mapping = package_dirs(root)
    shutil.rmtree(target, ignore_errors=True)
    for name in sorted(mapping, key=lambda n: n.count(".")):
        place = target.joinpath(*name.split("."))
        place.parent.mkdir(parents=True, exist_ok=True)
        if any(other.startswith(name + ".") for other in mapping):
            # Its subpackages come from other folders: a real folder, its own entries linked.
            place.mkdir()
            for entry in mapping[name].iterdir():
                if entry.name != "__pycache__":
                    _link(place / entry.name, entry)
        elif not place.exists():
            _link(place, mapping[name])


def _link(link: Path, to: Path) -> None:
    link.symlink_to(os.path.relpath(to, link.parent))


@event_priority(100)  # before mkdocstrings' own on_config, which looks for its paths
def on_config(config: Any, **kwargs: Any) -> Any:
    """mkdocs hook: the tree is laid out before mkdocstrings looks for it."""
    lay_out()
    return config


def _as_code(match: re.Match[str]) -> str:
    short, name = match.groups()
    return f"`{name.rsplit('.', 1)[-1] if short else name}`"


def literal_blocks(text: str) -> str:
    """reST's ``text::`` + blank line + block, as ``text:`` and a fenced code block. The
    block is the indented lines that follow (blank lines within kept), or, unindented, the
    lines up to the next blank one."""
    lines = text.split("\n")
    out: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if not (line.rstrip().endswith("::") and i + 2 < len(lines) and not lines[i + 1].strip()):
            out.append(line)
            i += 1
            continue
        out.append(line.rstrip()[:-1].rstrip(":").rstrip() + (":" if line.strip() != "::" else ""))
        indented = lines[i + 2][:1].isspace()
        block: list[str] = []
        j = i + 2
        while j < len(lines):
            current = lines[j]
            if current.strip():
                if indented and not current[:1].isspace():
                    break
            else:
                following = next((rest for rest in lines[j + 1 :] if rest.strip()), "")
                if not indented or not following[:1].isspace():
                    break
            block.append(current)
            j += 1
        out += ["", "```text", *textwrap.dedent("\n".join(block)).split("\n"), "```"]
        i = j
    return "\n".join(out)


class RstDocstrings(griffe.Extension):
    """``:class:`~a.b.Name``` becomes ```Name```, ``:mod:`a.b``` becomes ```a.b```, and
    literal blocks become code blocks."""

    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = literal_blocks(ROLE.sub(_as_code, obj.docstring.value))
