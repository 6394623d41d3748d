"""Worker processes for integration tests: real OS processes running ``raftflow worker``."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


class WorkerProcess:
    def __init__(self, app: str, url: str, log_path: Path, **options: object) -> None:
        argv = [sys.executable, "-m", "raftflow.engine.ops.cli", "worker", app, "--url", url]
        for name, value in options.items():
            argv += [f"--{name.replace('_', '-')}", str(value)]
        self.log_path = log_path
        self._log = open(log_path, "wb")  # noqa: SIM115 - closed in stop()
        self.process = subprocess.Popen(
            argv,
            cwd=ROOT,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )

    @property
    def pid(self) -> int:
        return self.process.pid

    def kill(self, sig: int = signal.SIGKILL) -> None:
        if self.process.poll() is None:
            self.process.send_signal(sig)

    def stop(self, timeout: float = 20.0) -> int | None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGCONT)
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._log.close()
        return self.process.returncode

    def output(self) -> str:
        return self.log_path.read_text(errors="replace")


def rotated_url(urls: Sequence[str], shift: int) -> str:
    """All nodes in one URL, starting with node ``shift``: workers enter through different
    nodes and fail over to the others."""
    hosts = [u.split("://", 1)[1] for u in urls]
    shift %= len(hosts)
    return "http://" + ",".join(hosts[shift:] + hosts[:shift])


@contextmanager
def workers(
    app: str, urls: Sequence[str], count: int, log_dir: Path, **options: object
) -> Iterator[list[WorkerProcess]]:
    log_dir.mkdir(parents=True, exist_ok=True)
    started = [
        WorkerProcess(app, rotated_url(urls, i), log_dir / f"worker-{i}.log", **options)
        for i in range(count)
    ]
    try:
        yield started
    finally:
        for worker in started:
            worker.stop()
