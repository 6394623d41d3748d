"""The systemd units of ``deploy/``: checked by ``systemd-analyze verify``, and run.

There is no systemd to start them here (it is not PID 1 in this container), so the second
test does what the units do by hand: each node's and each worker's ``ExecStart``, expanded
from the example environment files as systemd would, becomes the argv of a process. Three
nodes on three loopback addresses (127.a.b.11-13, the same ports 4001/4002 on each, as on
three machines), with the units' auth file and TLS certificate, and two workers of an app
in its own folder, the unit's working directory. Only paths are mapped (``/etc/rqlite`` to
a temporary folder, ``/usr/local/bin/rqlited`` to the harness's binary ...) and the
environment files hold this machine's addresses.
"""

from __future__ import annotations

import random
import shutil
import signal
import socket
import ssl
import subprocess
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

import httpx
import pytest
import trustme
from raftflow.engine.ops import demo
from raftflow.transports.rqlite.local.probe import leader_id
from raftflow.transports.rqlite.local.pytest_plugin import missing

from raftflow import Engine, Status
from tests.deploy.files import (
    DEPLOY,
    Service,
    on_this_machine,
    read_env_file,
    stop_all,
    unit_directives,
    unit_exec_start,
)
from tests.support import wait_until

pytestmark = pytest.mark.slow
NODE_UNIT = DEPLOY / "rqlite@.service"
WORKER_UNIT = DEPLOY / "raftflow-worker.service"
UNITS = sorted(DEPLOY.glob("*.service"))
NAMES = ("n1", "n2", "n3")
WORKER = ("worker", "change-me-too")  # deploy/users.example.json


def _systemd_units() -> Path | None:
    """Where systemd's own units are (``verify`` needs sysinit.target and the like)."""
    for folder in (Path("/usr/lib/systemd/system"), Path("/lib/systemd/system")):
        if (folder / "sysinit.target").exists():
            return folder
    return None


@pytest.fixture(scope="module")
def systemd_analyze() -> str:
    path = shutil.which("systemd-analyze")
    if path is None or _systemd_units() is None:
        message = "systemd-analyze or systemd's units are missing (Debian package: systemd)"
        missing(f"{message}; .ci/engines installs it")
    return path


def test_units_pass_systemd_analyze_verify(systemd_analyze: str, tmp_path: Path) -> None:
    """``verify`` in a root of its own: systemd's units, ours, and an executable stand-in
    for each program our units run (verify checks that it is executable, and runs nothing)."""
    root = tmp_path / "root"
    system = _systemd_units()
    assert system is not None
    shutil.copytree(system, root / "usr/lib/systemd/system", ignore_dangling_symlinks=True)
    ours = root / "etc/systemd/system"
    ours.mkdir(parents=True)
    for unit in UNITS:
        shutil.copy(unit, ours / unit.name)
        for command in unit_directives(unit)["ExecStart"]:
            program = root / command.split()[0].lstrip("/")
            program.parent.mkdir(parents=True, exist_ok=True)
            program.write_text("#!/bin/sh\n")
            program.chmod(0o755)
    names = [u.name.replace("@.", "@n1.") for u in UNITS]
    done = subprocess.run(
        [systemd_analyze, f"--root={root}", "verify", *names],
        capture_output=True,
        text=True,
        timeout=60,
    )
    # Unknown keys and bad values are warnings with exit status 0: no output is the bar.
    assert (done.returncode, done.stdout + done.stderr) == (0, "")


def _free_loopback_hosts() -> list[str]:
    """Three addresses 127.a.b.11-13 whose ports 4001 and 4002 are free."""
    for _ in range(20):
        prefix = f"127.{random.randint(1, 254)}.{random.randint(0, 255)}"
        hosts = [f"{prefix}.{i}" for i in (11, 12, 13)]
        try:
            for host in hosts:
                for port in (4001, 4002):
                    with socket.socket() as s:
                        s.bind((host, port))
        except OSError:
            continue
        return hosts
    raise RuntimeError("no free loopback addresses")


def _mapped(argv: Sequence[str], paths: Mapping[str, Path]) -> list[str]:
    """``argv`` with each absolute path under a key of ``paths`` moved under its value."""
    out = []
    for word in argv:
        for prefix, target in sorted(paths.items(), key=lambda kv: -len(kv[0])):
            if word == prefix or word.startswith(prefix + "/"):
                word = str(target) + word[len(prefix) :]
                break
        out.append(word)
    return out


class Machines:
    """Three "machines" (loopback addresses) running the units' commands."""

    def __init__(self, tmp_path: Path, rqlited: Path) -> None:
        self.tmp = tmp_path
        self.hosts = _free_loopback_hosts()
        self.paths = {
            "/usr/local/bin/rqlited": rqlited,
            "/etc/rqlite": tmp_path / "etc/rqlite",
            "/var/lib/rqlite": tmp_path / "var/lib/rqlite",
            "/etc/raftflow": tmp_path / "etc/raftflow",
            "/srv/myapp": tmp_path / "srv/myapp",
        }
        for folder in list(self.paths.values())[1:]:
            folder.mkdir(parents=True)
        ca = trustme.CA()
        cert = ca.issue_cert(*self.hosts)
        cert.private_key_pem.write_to_path(str(self.paths["/etc/rqlite"] / "tls.key"))
        cert.cert_chain_pems[0].write_to_path(str(self.paths["/etc/rqlite"] / "tls.crt"))
        self.ca_file = self.paths["/etc/raftflow"] / "rqlite-ca.crt"
        ca.cert_pem.write_to_path(str(self.ca_file))
        shutil.copy(DEPLOY / "users.example.json", self.paths["/etc/rqlite"] / "users.json")
        # The app, in the unit's working directory.
        (self.paths["/srv/myapp"] / "myapp.py").write_text(
            "from raftflow.engine.ops.demo import engine  # noqa: F401\n"
        )
        example = read_env_file(DEPLOY / "rqlite.env.example")
        self.rename = {
            address.rsplit(":", 1)[0]: host
            for address, host in zip(example["JOIN"].split(","), self.hosts)
        }
        self.nodes: dict[str, Service] = {}
        self.node_argv: dict[str, list[str]] = {}
        self.workers: list[Service] = []
        verify = ssl.create_default_context(cafile=str(self.ca_file))
        self.http = httpx.Client(verify=verify, auth=WORKER, timeout=2)

    def _localized(self, value: str) -> str:
        for name, host in self.rename.items():
            value = value.replace(name, host)
        return value

    def node_env(self, index: int) -> dict[str, str]:
        env = {
            k: self._localized(v) for k, v in read_env_file(DEPLOY / "rqlite.env.example").items()
        }
        env.update(NODE_ID=NAMES[index], ADV_HOST=self.hosts[index])
        env["BIND_HOST"] = self.hosts[index]  # three "machines" share this one's ports
        return env

    def start_node(self, index: int) -> None:
        name = NAMES[index]
        if name not in self.node_argv:
            argv = unit_exec_start(NODE_UNIT, instance=name, env=self.node_env(index))
            self.node_argv[name] = _mapped(argv, self.paths)
        self.nodes[name] = Service(self.node_argv[name], self.tmp / f"{name}.log", env={})

    def url(self, index: int) -> str:
        return f"https://{self.hosts[index]}:4001"

    def ready(self, index: int) -> bool:
        try:
            return self.http.get(self.url(index) + "/readyz").status_code == 200
        except httpx.HTTPError:
            return False

    def leader(self) -> int:
        for index in range(3):
            try:
                status = self.http.get(self.url(index) + "/status").json()
            except (httpx.HTTPError, ValueError):
                continue
            if (found := leader_id(status)) in NAMES:
                return NAMES.index(found)
        raise AssertionError("no leader")

    def worker_url(self) -> str:
        return self._localized(read_env_file(DEPLOY / "worker.env.example")["RAFTFLOW_URL"])

    def start_worker(self) -> None:
        env = {"RAFTFLOW_URL": self.worker_url()}
        argv = on_this_machine(_mapped(unit_exec_start(WORKER_UNIT, env=env), self.paths))
        (cwd,) = _mapped(unit_directives(WORKER_UNIT)["WorkingDirectory"], self.paths)
        log = self.tmp / f"worker-{len(self.workers)}.log"
        self.workers.append(Service(argv, log, env=env, cwd=Path(cwd)))

    def close(self) -> None:
        for service in [*self.workers, *self.nodes.values()]:
            service.stop(timeout=20)
        self.http.close()


@pytest.fixture
def machines(tmp_path: Path, rqlited_path: Path) -> Iterator[Machines]:
    topology = Machines(tmp_path, rqlited_path)
    try:
        yield topology
    finally:
        topology.close()


@pytest.fixture
def demo_engine() -> Iterator[Engine]:
    yield demo.engine
    demo.engine.close()


def test_three_nodes_and_two_workers_started_as_the_units_start_them(
    machines: Machines, demo_engine: Engine
) -> None:
    for index in range(3):
        machines.start_node(index)
    wait_until(lambda: all(machines.ready(i) for i in range(3)), timeout=60, interval=0.2)
    for _ in range(2):
        machines.start_worker()

    demo_engine.connect(machines.worker_url(), verify=str(machines.ca_file))
    orders = demo.orders(12)
    handles = [demo.start(order) for order in orders]
    wait_until(lambda: sum(h.status() is Status.SUCCEEDED for h in handles) >= 3, 60)
    # `systemctl stop rqlite@<leader>`: KillSignal=SIGTERM, the leader steps down.
    leader = machines.leader()
    assert machines.nodes[NAMES[leader]].stop(signal.SIGTERM) == 0
    receipts = [handle.result(timeout=120) for handle in handles]
    assert [r.order_id for r in receipts] == [o.id for o in orders]
    assert all(len(h.steps()) == demo.CALLS for h in handles)
    # Restart=always: the same command line, the same data directory; it rejoins.
    machines.start_node(leader)
    wait_until(lambda: machines.ready(leader), timeout=60, interval=0.2)

    # `systemctl stop raftflow-worker`: SIGTERM drains and the worker exits cleanly.
    codes = stop_all(machines.workers, signal.SIGTERM)
    assert codes == [0, 0], [w.output()[-3000:] for w in machines.workers]
