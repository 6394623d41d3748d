"""The transaction-step example of docs/guides/transactions.md (``# bank.py``), run as a
user would: the code block alone in an empty folder, ``python bank.py``, twice."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "guides" / "transactions.md"


def test_the_bank_example_runs_and_prints_what_the_guide_says(tmp_path: Path) -> None:
    (code,) = re.findall(r"```python\n(# bank\.py\n.*?)```", GUIDE.read_text(), re.S)
    (tmp_path / "bank.py").write_text(code)

    def run() -> list[str]:
        done = subprocess.run(
            [sys.executable, "bank.py"],
            cwd=tmp_path,
            env={**os.environ, "PYTHONPATH": ""},
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr[-3000:]
        return done.stdout.splitlines()

    assert run() == ["paid, 3 left", "declined"]
    assert run() == ["declined", "declined"]  # alice was opened once
