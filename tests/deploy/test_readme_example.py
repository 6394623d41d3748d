"""deploy/README.md's example of the container fixtures in a user's own test suite, run as
one: its code block alone in a folder, no conftest, the fixtures coming from the installed
``raftflow_rqlite_docker`` entry point (on the image this session built: the example's
default, the official image, cannot be pulled here)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.deploy.files import DEPLOY

pytestmark = pytest.mark.slow


def test_the_readme_example_passes_in_a_suite_of_its_own(rqlite_image: str, tmp_path: Path) -> None:
    readme = (DEPLOY / "README.md").read_text()
    (code,) = re.findall(r"```python\n(# test_checkout\.py.*?)```", readme, re.S)
    (tmp_path / "test_checkout.py").write_text(code)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "--rqlite-image",
            rqlite_image,
            "test_checkout.py",
        ],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": ""},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "1 passed" in done.stdout
