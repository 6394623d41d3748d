"""``python -m tests.packaging.build FOLDER``: what tests/packaging/test_wheel.py checks.

Builds this checkout's wheel and sdist into ``FOLDER/dist`` and installs the wheel, with
its dependencies, into a fresh virtualenv ``FOLDER/venv`` (by this pip, ``--python``: the
virtualenv has no pip of its own). The suite runs it at its start on idle CPU
(tests/background.py).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import venv
from pathlib import Path

from tests import background

ROOT = Path(__file__).resolve().parents[2]


def run(*args: str | Path) -> None:
    done = subprocess.run([str(a) for a in args], capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        raise SystemExit(f"{args} failed:\n{done.stdout}\n{done.stderr}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.packaging.build")
    parser.add_argument("folder", type=Path)
    parser.add_argument("--idle", action="store_true", help="run only on otherwise idle CPU")
    args = parser.parse_args(argv)
    if args.idle:
        background.lowest_priority()
    dist, env = args.folder / "dist", args.folder / "venv"
    run(sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", dist, ROOT)
    run(sys.executable, "-m", "build", "--sdist", "-o", dist, ROOT)
    venv.create(env, with_pip=False)
    (wheel,) = dist.glob("raftflow-*.whl")
    run(sys.executable, "-m", "pip", "--python", env / "bin" / "python", "install", "-q", wheel)
    print(f"built {sorted(p.name for p in dist.iterdir())}, installed into {env}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
