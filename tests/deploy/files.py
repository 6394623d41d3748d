"""Reading the files of ``deploy/`` the way their tools do, and running their commands here.

- compose and Kubernetes files are YAML (merge keys included);
- a systemd unit's ``ExecStart`` is split as systemd does: ``\\``-continued lines joined,
  words split like a shell, ``%i`` the instance, ``${VAR}`` one word from the environment
  file, ``$VAR`` split into words;
- a worker or node command is run on this machine with its program mapped to the one
  installed here (``raftflow`` of this virtualenv, ``rqlited`` of the harness).
"""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
K8S = DEPLOY / "k8s"
RAFTFLOW = str(Path(sys.executable).with_name("raftflow"))  # this virtualenv's command


def load_yaml(path: Path) -> Any:
    return yaml.safe_load(path.read_text())


def load_yaml_documents(path: Path) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc is not None]


def k8s_documents() -> list[tuple[Path, dict[str, Any]]]:
    return [(path, doc) for path in sorted(K8S.glob("*.yaml")) for doc in load_yaml_documents(path)]


def k8s_object(kind: str, name: str) -> dict[str, Any]:
    for _path, doc in k8s_documents():
        if doc["kind"] == kind and doc["metadata"]["name"] == name:
            return doc
    raise KeyError(f"{kind}/{name}")


def unit_directives(path: Path) -> dict[str, list[str]]:
    """Every ``Key=value`` of a unit file, continued lines joined, comments dropped."""
    directives: dict[str, list[str]] = {}
    logical = ""
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if not logical and (not line or line.startswith(("#", ";", "["))):
            continue
        if line.endswith("\\"):
            logical += line[:-1] + " "
            continue
        logical += line
        key, _, value = logical.partition("=")
        directives.setdefault(key.strip(), []).append(value.strip())
        logical = ""
    return directives


def unit_exec_start(path: Path, *, instance: str = "", env: Mapping[str, str] = {}) -> list[str]:
    """The unit's ``ExecStart`` as the argv systemd would run (see the module doc)."""
    (command,) = unit_directives(path)["ExecStart"]
    argv: list[str] = []
    for word in shlex.split(command.replace("%i", instance)):
        if re.fullmatch(r"\$\w+", word):
            argv += env[word[1:]].split()
        else:
            argv.append(re.sub(r"\$\{(\w+)\}", lambda m: env[m.group(1)], word))
    return argv


def read_env_file(path: Path) -> dict[str, str]:
    pairs = (line.split("=", 1) for line in path.read_text().splitlines() if "=" in line)
    return {key.strip(): value.strip() for key, value in pairs if not key.startswith("#")}


def dockerfile_cmd(path: Path) -> list[str]:
    """The exec form ``CMD [...]`` of a Dockerfile."""
    import json

    (line,) = [ln for ln in path.read_text().splitlines() if ln.startswith("CMD ")]
    value: list[str] = json.loads(line[len("CMD ") :])
    return value


class Service:
    """A command of ``deploy/`` run here as a child process, its output in a log file."""

    def __init__(
        self, argv: Sequence[str], log_path: Path, *, env: Mapping[str, str], cwd: Path = ROOT
    ) -> None:
        self.argv = list(argv)
        self.log_path = log_path
        self._log = open(log_path, "wb")  # noqa: SIM115 - closed in stop()
        self.process = subprocess.Popen(
            self.argv,
            cwd=cwd,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONUNBUFFERED": "1", **env},
        )

    def stop(self, sig: int | None = signal.SIGTERM, timeout: float = 30.0) -> int:
        """Send ``sig`` (SIGTERM drains a worker; None: it was sent already), wait, SIGKILL
        after ``timeout``. A second SIGTERM would make a draining worker exit at once."""
        if self.process.poll() is None:
            if sig is not None:
                self.process.send_signal(sig)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._log.close()
        return self.process.returncode

    def output(self) -> str:
        return self.log_path.read_text(errors="replace")


def on_this_machine(argv: Sequence[str]) -> list[str]:
    """``argv`` with a ``raftflow`` program (bare or a path) replaced by this virtualenv's."""
    program = argv[0]
    if program == "raftflow" or program.endswith("/bin/raftflow"):
        return [RAFTFLOW, *argv[1:]]
    return list(argv)


def stop_all(services: Sequence[Service], sig: int = signal.SIGTERM) -> list[int]:
    """Signal every service at once (a worker's drain takes a while), then wait for each."""
    for service in services:
        if service.process.poll() is None:
            service.process.send_signal(sig)
    return [service.stop(None) for service in services]
