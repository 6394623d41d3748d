"""The docs site builds with ``mkdocs build --strict`` (a broken link, anchor or API reference
fails), its API reference covers every public name, and the commands it and the README show
exist: every ``make`` target, every ``raftflow`` command and option."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from importlib.metadata import entry_points
from pathlib import Path

import pytest

import raftflow

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
PAGES = sorted([ROOT / "README.md", ROOT / "CONTRIBUTING.md", *DOCS.rglob("*.md")])
SHELL_BLOCK = re.compile(r"```(?:sh|bash|console)\n(.*?)```", re.S)


def test_the_docs_build_strict(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path)],
        cwd=ROOT,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert (tmp_path / "reference" / "engine" / "index.html").exists()


def test_every_public_name_is_in_the_api_reference() -> None:
    """Each name of ``raftflow.__all__`` has an entry (``::: raftflow.Name``), or its module
    has one (``::: raftflow.errors`` documents every error)."""
    documented = {
        line.removeprefix(":::").strip()
        for page in (DOCS / "reference").glob("*.md")
        for line in page.read_text().splitlines()
        if line.startswith("::: raftflow")
    }
    missing = [
        name
        for name in raftflow.__all__
        if name != "__version__"
        and f"raftflow.{name}" not in documented
        and getattr(getattr(raftflow, name), "__module__", None) not in documented
    ]
    assert not missing, f"public names without an entry in docs/reference/: {missing}"


def test_the_links_of_the_pages_outside_the_site_exist() -> None:
    """README.md and CONTRIBUTING.md are read on their own (mkdocs checks only docs/)."""
    broken = []
    for page in (ROOT / "README.md", ROOT / "CONTRIBUTING.md"):
        for target in re.findall(r"\]\(([^)\s]+)\)", page.read_text()):
            path = target.split("#", 1)[0]
            if path and "://" not in path and not (page.parent / path).exists():
                broken.append((page.name, target))
    assert not broken, f"links to files that do not exist: {broken}"


def _shell_lines(text: str) -> list[list[str]]:
    """The commands of a page's shell blocks, continuation lines joined, comments dropped."""
    commands = []
    for block in SHELL_BLOCK.findall(text):
        for line in block.replace("\\\n", " ").splitlines():
            words = shlex.split(line, comments=True)
            # `a && b`, `a; b`: each command on its own
            current: list[str] = []
            for word in [*words, ";"]:
                if word not in (";", "&&", "||", "|"):
                    current.append(word.removesuffix(";"))
                if word in (";", "&&", "||", "|") or word.endswith(";"):
                    if current and current[-1] == "":
                        current.pop()
                    if current:
                        commands.append(current)
                    current = []
    return commands


def _commands(program: str) -> list[tuple[Path, list[str]]]:
    found = []
    for page in PAGES:
        for words in _shell_lines(page.read_text()):
            while words and ("=" in words[0] or words[0] in ("sudo", "exec")):
                words = words[1:]  # VAR=value prefixes
            if words and Path(words[0]).name == program:
                found.append((page, words[1:]))
    return found


def test_every_make_target_shown_exists() -> None:
    makefile = (ROOT / "Makefile").read_text()
    targets = set(re.findall(r"^([a-z][a-z0-9-]*):", makefile, re.M))
    shown = _commands("make")
    assert shown, "no make command found in the docs"
    unknown = [
        (page.relative_to(ROOT), words[0])
        for page, words in shown
        if words and "=" not in words[0] and words[0] not in targets
    ]
    assert not unknown, f"make targets that the Makefile lacks: {unknown}"


def test_every_raftflow_command_and_option_shown_exists(
    capsys: pytest.CaptureFixture[str],
) -> None:
    (script,) = entry_points(group="console_scripts", name="raftflow")
    main = script.load()
    shown = _commands("raftflow")
    assert shown, "no raftflow command found in the docs"
    helps: dict[str, str] = {}
    wrong = []
    for page, words in shown:
        if not words or words[0].startswith("-"):
            continue  # `raftflow --help`, `raftflow --version`
        command = words[0]
        if command not in helps:
            capsys.readouterr()
            code = main([command, "--help"])
            helps[command] = capsys.readouterr().out if code == 0 else ""
        if not helps[command]:
            wrong.append((page.relative_to(ROOT), command))
            continue
        for word in words[1:]:
            option = word.split("=", 1)[0]
            named = re.compile(rf"(?<![\w-]){re.escape(option)}(?![\w-])")
            if re.fullmatch(r"--[a-z][a-z0-9-]*", option) and not named.search(helps[command]):
                wrong.append((page.relative_to(ROOT), f"{command} {option}"))
    assert not wrong, f"raftflow commands or options that do not exist: {wrong}"
