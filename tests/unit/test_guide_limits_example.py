"""The example of docs/guides/limits.md (concurrency limits, rate limits and debounce) runs
as it is."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_limits_guide_example_runs(tmp_path: Path) -> None:
    guide = (ROOT / "docs" / "guides" / "limits.md").read_text()
    (code,) = re.findall(r"```python\n(# limits_example\.py.*?)```", guide, re.S)
    (tmp_path / "limits_example.py").write_text(code)
    done = subprocess.run(
        [sys.executable, "limits_example.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["[0, 0, 2, 2, 4, 4]", "synced ada"]
