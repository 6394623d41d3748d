"""The benchmark's child processes and the little protocol they speak with the parent.

A child prints ``READY`` on stdout once it can work, prints ``MARK n`` each time it gets
SIGUSR1 (after recording a snapshot of its counters: the parent cuts measurement windows
between marks), stops on SIGTERM and then writes its JSON to ``--out``. Its stderr goes
to a log file, whose tail is shown when a child fails.
"""

from __future__ import annotations

import asyncio
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


class ChildError(RuntimeError):
    """A child process failed, exited early or did not answer in time."""


# ---------------------------------------------------------------------------- child side


def announce(line: str) -> None:
    print(line, flush=True)


def install_handlers(
    loop: asyncio.AbstractEventLoop,
    take_mark: Callable[[], None],
    stop: Callable[[], None],
) -> None:
    """SIGUSR1 records a mark and says ``MARK n``; SIGTERM / SIGINT call ``stop``."""
    count = 0

    def on_mark() -> None:
        nonlocal count
        count += 1
        take_mark()
        announce(f"MARK {count}")

    loop.add_signal_handler(signal.SIGUSR1, on_mark)
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop)


def ignore_signals() -> None:
    """Once the loop is closed (its handlers gone), a late signal must not kill the child
    while it writes its JSON."""
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGUSR1):
        signal.signal(sig, signal.SIG_IGN)


def write_json(path: str, data: Any) -> None:
    tmp = f"{path}.tmp"
    with open(tmp, "w") as file:
        json.dump(data, file)
    os.replace(tmp, path)


def process_times() -> dict[str, float]:
    times = os.times()
    return {"user": times.user, "system": times.system}


# --------------------------------------------------------------------------- parent side


class Child:
    """One child process: ``python -m <module> <args> --out <dir>/<name>.json``."""

    def __init__(self, name: str, module: str, args: Sequence[str], work_dir: Path) -> None:
        self.name = name
        self.out = work_dir / f"{name}.json"
        self.log_path = work_dir / f"{name}.log"
        argv = [sys.executable, "-m", module, *args, "--out", str(self.out)]
        self._log = open(self.log_path, "wb")  # noqa: SIM115 - closed in stop()
        self.process = subprocess.Popen(
            argv,
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=self._log,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        self._lines: queue.Queue[str | None] = queue.Queue()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    @property
    def pid(self) -> int:
        return self.process.pid

    def _read(self) -> None:
        assert self.process.stdout is not None
        for raw in self.process.stdout:
            self._lines.put(raw.decode(errors="replace").rstrip("\n"))
        self._lines.put(None)

    def wait_for(self, expected: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise ChildError(f"{self.name}: no {expected!r} within {timeout}s{self.tail()}")
            try:
                line = self._lines.get(timeout=min(remaining, 0.5))
            except queue.Empty:
                continue
            if line is None:
                self.process.wait()
                raise ChildError(
                    f"{self.name} exited ({self.process.returncode}) before {expected!r}"
                    f"{self.tail()}"
                )
            if line == expected:
                return

    def signal(self, sig: int) -> None:
        if self.process.poll() is None:
            self.process.send_signal(sig)

    def stop(self, timeout: float = 60.0, *, signalled: bool = False) -> dict[str, Any]:
        """SIGTERM (once), wait, and return the JSON the child wrote."""
        if not signalled:
            self.signal(signal.SIGTERM)
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            raise ChildError(f"{self.name} did not stop within {timeout}s{self.tail()}") from None
        finally:
            self._log.close()
        if self.process.returncode != 0 or not self.out.exists():
            raise ChildError(f"{self.name} exited with {self.process.returncode}{self.tail()}")
        with open(self.out) as file:
            data: dict[str, Any] = json.load(file)
        return data

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        if not self._log.closed:
            self._log.close()

    def tail(self, lines: int = 25) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return ""
        return f"\n--- {self.log_path} (tail) ---\n" + "\n".join(text.splitlines()[-lines:])


def wait_all(children: Iterable[Child], expected: str, timeout: float) -> None:
    for child in children:
        child.wait_for(expected, timeout)


def mark_all(children: Sequence[Child], number: int, timeout: float = 30.0) -> None:
    """Signal every child at once, then wait until each has recorded mark ``number``."""
    for child in children:
        child.signal(signal.SIGUSR1)
    wait_all(children, f"MARK {number}", timeout)


def stop_all(children: Sequence[Child], timeout: float = 60.0) -> list[dict[str, Any]]:
    for child in children:
        child.signal(signal.SIGTERM)
    return [child.stop(timeout, signalled=True) for child in children]


def kill_all(children: Iterable[Child]) -> None:
    for child in children:
        child.kill()
