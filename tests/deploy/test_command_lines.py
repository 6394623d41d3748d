"""One set of command lines: the rqlited flags and the worker command of every file in
``deploy/`` are the ones :mod:`raftflow.transports.rqlite.local.topology` builds for the
local cluster and the containers (which the rest of the suite runs)."""

from __future__ import annotations

from pathlib import Path

import tomllib
from raftflow.transports.rqlite.local import RQLITE_VERSION, LocalCluster
from raftflow.transports.rqlite.local.topology import (
    RQLITED,
    URL_VARIABLE,
    rqlited_args,
    served_node_args,
    worker_args,
)

from tests.deploy.files import (
    DEPLOY,
    ROOT,
    dockerfile_cmd,
    k8s_object,
    load_yaml,
    read_env_file,
    unit_exec_start,
)

DEMO = "raftflow.engine.ops.demo:engine"
COMPOSE_HOSTS = ["rqlite1", "rqlite2", "rqlite3"]
POD = "$(POD_NAME)"
POD_HOSTS = [f"rqlite-{i}.rqlite-internal" for i in range(3)]


def test_compose_nodes_run_the_shared_flags() -> None:
    services = load_yaml(DEPLOY / "docker-compose.yml")["services"]
    for host in COMPOSE_HOSTS:
        service = services[host]
        assert service["entrypoint"] == [RQLITED]
        assert service["hostname"] == host
        assert service["command"] == served_node_args(host, host, COMPOSE_HOSTS)


def test_compose_workers_and_migration_run_the_shared_commands() -> None:
    services = load_yaml(DEPLOY / "docker-compose.yml")["services"]
    assert services["worker"]["command"] == worker_args(DEMO, concurrency=8)
    assert services["migrate"]["command"] == ["raftflow", "migrate"]
    nodes = ",".join(f"{host}:4001" for host in COMPOSE_HOSTS)
    for name in ("worker", "migrate"):
        assert services[name]["environment"] == {URL_VARIABLE: f"http://{nodes}"}
    conditions = services["worker"]["depends_on"]
    assert conditions == {"migrate": {"condition": "service_completed_successfully"}}


def test_the_worker_image_runs_the_shared_worker_command() -> None:
    assert dockerfile_cmd(DEPLOY / "worker.Dockerfile") == worker_args(DEMO, concurrency=8)


def test_kubernetes_nodes_run_the_shared_flags() -> None:
    statefulset = k8s_object("StatefulSet", "rqlite")
    (container,) = statefulset["spec"]["template"]["spec"]["containers"]
    assert container["command"] == [RQLITED]
    assert container["args"] == served_node_args(
        POD,
        f"{POD}.rqlite-internal",
        POD_HOSTS,
        auth_file="/etc/rqlite/users.json",
        join_as="cluster",
    )
    assert statefulset["spec"]["replicas"] == len(POD_HOSTS)
    assert (
        statefulset["metadata"]["name"] + "-0." + statefulset["spec"]["serviceName"]
        == (POD_HOSTS[0])
    )
    (env,) = container["env"]
    assert env == {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}


def test_kubernetes_workers_and_migration_run_the_shared_commands() -> None:
    deployment = k8s_object("Deployment", "raftflow-worker")
    (worker,) = deployment["spec"]["template"]["spec"]["containers"]
    assert worker["command"] == worker_args(DEMO, concurrency=8)
    job = k8s_object("Job", "raftflow-migrate")
    (migrate,) = job["spec"]["template"]["spec"]["containers"]
    assert migrate["command"] == ["raftflow", "migrate"]
    secret_url = {"secretKeyRef": {"name": "raftflow-credentials", "key": "url"}}
    for container in (worker, migrate):
        assert container["env"] == [{"name": URL_VARIABLE, "valueFrom": secret_url}]


def test_systemd_node_unit_runs_the_shared_flags() -> None:
    env = read_env_file(DEPLOY / "rqlite.env.example")
    argv = unit_exec_start(DEPLOY / "rqlite@.service", instance="n1", env=env)
    hosts = [address.rsplit(":", 1)[0] for address in env["JOIN"].split(",")]
    assert argv[0] == "/usr/local/bin/rqlited"
    assert argv[1:] == served_node_args(
        env["NODE_ID"],
        env["ADV_HOST"],
        hosts,
        bind=env["BIND_HOST"],
        data_dir="/var/lib/rqlite/n1",
        auth_file="/etc/rqlite/users.json",
        join_as="cluster",
        http_cert="/etc/rqlite/tls.crt",
        http_key="/etc/rqlite/tls.key",
    )


def test_systemd_worker_unit_runs_the_shared_command() -> None:
    env = read_env_file(DEPLOY / "worker.env.example")
    argv = unit_exec_start(DEPLOY / "raftflow-worker.service", env=env)
    assert argv == worker_args(
        "myapp:engine",
        concurrency=8,
        program="/srv/myapp/.venv/bin/raftflow",
        ca_file="/etc/raftflow/rqlite-ca.crt",
    )
    assert set(env) == {URL_VARIABLE}


def test_the_local_cluster_runs_the_shared_flags() -> None:
    """LocalCluster's nodes (which the integration suite runs) are built by rqlited_args;
    a served node is the same flags plus its advertised addresses."""
    cluster = LocalCluster(3, binary="/bin/rqlited")
    cluster._root = Path("/data")
    nodes = cluster._make_nodes([4001, 4002, 4011, 4012, 4021, 4022])
    join = [node.raft_addr for node in nodes]
    for node in nodes:
        flags = [a for a in node.args[1:] if a != "-raft-cluster-remove-shutdown=false"]
        assert flags == rqlited_args(
            node_id=node.node_id,
            http_addr=node.http_addr,
            raft_addr=node.raft_addr,
            join=join,
            data_dir=str(node.data_dir),
        )
    served = served_node_args("node1", "rqlite1", COMPOSE_HOSTS)
    assert _names(served) - {"-http-adv-addr", "-raft-adv-addr"} == _names(flags)


def _names(args: list[str]) -> set[str]:
    return {a for a in args if a.startswith("-")}


def test_every_file_names_the_same_images() -> None:
    """rqlite is the pinned version everywhere; the worker image is this raftflow's."""
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    rqlite, worker = f"rqlite/rqlite:{RQLITE_VERSION}", f"raftflow/worker:{version}"
    services = load_yaml(DEPLOY / "docker-compose.yml")["services"]
    assert {services[h]["image"] for h in COMPOSE_HOSTS} == {rqlite}
    assert {services[s]["image"] for s in ("worker", "migrate")} == {worker}
    objects = [("StatefulSet", "rqlite"), ("Deployment", "raftflow-worker")]
    objects.append(("Job", "raftflow-migrate"))
    pods = [k8s_object(kind, name)["spec"]["template"]["spec"] for kind, name in objects]
    assert [c["image"] for pod in pods for c in pod["containers"]] == [rqlite, worker, worker]
    assert "WORKER_IMAGE := raftflow/worker:$(shell" in (ROOT / "Makefile").read_text()
