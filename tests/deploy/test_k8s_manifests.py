"""``deploy/k8s/``, validated offline (no Kubernetes here): every object parses into the
``kubernetes`` client's model of its kind with no field the model does not know and the
right JSON types, the models' own required-field checks pass, and the pieces fit together
(selectors, the headless Service, the Secret's users, probes, grace periods, volumes).

What only a real cluster would show (scheduling, DNS timing, volume provisioning) is not
covered; the same rqlited flags and worker command do run for real in the container and
compose tests (``test_command_lines.py`` ties them together)."""

from __future__ import annotations

import json
import re
from typing import Any
from urllib.parse import urlsplit

import pytest
from kubernetes import client
from raftflow.engine.runtime.worker import WorkerOptions
from raftflow.transports.rqlite.local.topology import DATA_DIR, HTTP_PORT, RAFT_PORT

from tests.deploy.files import k8s_documents, k8s_object

KINDS = {
    ("v1", "Secret"): "V1Secret",
    ("v1", "Service"): "V1Service",
    ("apps/v1", "StatefulSet"): "V1StatefulSet",
    ("apps/v1", "Deployment"): "V1Deployment",
    ("batch/v1", "Job"): "V1Job",
    ("policy/v1", "PodDisruptionBudget"): "V1PodDisruptionBudget",
}
PRIMITIVES: dict[str, tuple[type, ...]] = {
    "str": (str,),
    "int": (int,),
    "float": (int, float),
    "bool": (bool,),
    "datetime": (str,),
    "date": (str,),
}


def schema_problems(data: Any, klass: str, path: str) -> list[str]:
    """Fields of ``data`` that model ``klass`` does not have, and values of the wrong type."""
    if klass == "object":  # IntOrString, quantities, free-form: the API server's business
        return []
    if klass in PRIMITIVES:
        ok = isinstance(data, PRIMITIVES[klass]) and not (
            isinstance(data, bool) and klass != "bool"
        )
        return [] if ok else [f"{path}: {data!r} is not {klass}"]
    if match := re.fullmatch(r"(?:List|list)\[(.+)\]", klass):
        if not isinstance(data, list):
            return [f"{path}: expected a list"]
        return [
            p
            for i, item in enumerate(data)
            for p in schema_problems(item, match[1], f"{path}[{i}]")
        ]
    if match := re.fullmatch(r"(?:Dict\[str, (.+)\]|dict\(str, (.+)\))", klass):
        if not isinstance(data, dict):
            return [f"{path}: expected a mapping"]
        inner = match[1] or match[2]
        return [p for k, v in data.items() for p in schema_problems(v, inner, f"{path}.{k}")]
    model = getattr(client, klass)
    if not isinstance(data, dict):
        return [f"{path}: expected a {klass} mapping"]
    by_json_name = {json_name: attr for attr, json_name in model.attribute_map.items()}
    problems = []
    for key, value in data.items():
        attr = by_json_name.get(key)
        if attr is None:
            problems.append(f"{path}.{key}: unknown field of {klass}")
        else:
            problems += schema_problems(value, model.openapi_types[attr], f"{path}.{key}")
    return problems


DOCUMENTS = k8s_documents()


@pytest.mark.parametrize(
    "document",
    [doc for _path, doc in DOCUMENTS],
    ids=[f"{path.name}:{doc['kind']}/{doc['metadata']['name']}" for path, doc in DOCUMENTS],
)
def test_each_object_is_a_valid_model_of_its_kind(document: dict[str, Any]) -> None:
    klass = KINDS[(document["apiVersion"], document["kind"])]
    assert schema_problems(document, klass, document["kind"]) == []
    # The client's own deserialization runs its required-field and enum checks.
    model = client.ApiClient()._ApiClient__deserialize(document, klass)  # type: ignore[attr-defined]
    assert model.metadata.name == document["metadata"]["name"]


def test_every_file_holds_known_kinds_and_unique_names() -> None:
    names = [(doc["kind"], doc["metadata"]["name"]) for _path, doc in DOCUMENTS]
    assert len(names) == len(set(names))
    assert {(doc["apiVersion"], doc["kind"]) for _path, doc in DOCUMENTS} == set(KINDS)


def _pod_labels() -> list[dict[str, str]]:
    return [
        doc["spec"]["template"]["metadata"]["labels"]
        for _path, doc in DOCUMENTS
        if doc["kind"] in ("StatefulSet", "Deployment", "Job")
    ]


def _selects(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return all(labels.get(key) == value for key, value in selector.items())


def test_selectors_match_the_pods_they_mean() -> None:
    for _path, doc in DOCUMENTS:
        spec = doc.get("spec", {})
        if doc["kind"] in ("StatefulSet", "Deployment"):
            assert _selects(spec["selector"]["matchLabels"], spec["template"]["metadata"]["labels"])
        if doc["kind"] == "Service":
            assert any(_selects(spec["selector"], labels) for labels in _pod_labels())
    pdb = k8s_object("PodDisruptionBudget", "rqlite")
    statefulset = k8s_object("StatefulSet", "rqlite")
    assert pdb["spec"]["maxUnavailable"] == 1
    assert pdb["spec"]["selector"]["matchLabels"] == statefulset["spec"]["selector"]["matchLabels"]


def test_rqlite_statefulset_joins_through_the_headless_service() -> None:
    statefulset = k8s_object("StatefulSet", "rqlite")
    spec = statefulset["spec"]
    headless = k8s_object("Service", spec["serviceName"])["spec"]
    assert headless["clusterIP"] == "None"
    assert headless["publishNotReadyAddresses"] is True  # peers resolve before Ready
    assert {p["port"] for p in headless["ports"]} == {HTTP_PORT, RAFT_PORT}
    assert spec["podManagementPolicy"] == "Parallel"  # all three start; none waits for Ready
    (container,) = spec["template"]["spec"]["containers"]
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert container["livenessProbe"]["httpGet"]["path"] == "/readyz?noleader"
    assert {p["containerPort"] for p in container["ports"]} == {HTTP_PORT, RAFT_PORT}
    (claim,) = spec["volumeClaimTemplates"]
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    assert mounts[claim["metadata"]["name"]] == DATA_DIR.rsplit("/", 1)[0]
    assert container["args"][-1] == DATA_DIR


def test_credentials_come_from_the_secret_and_fit_the_flags() -> None:
    secret = k8s_object("Secret", "raftflow-credentials")["stringData"]
    users = {user["username"]: set(user["perms"]) for user in json.loads(secret["users.json"])}
    statefulset = k8s_object("StatefulSet", "rqlite")
    pod = statefulset["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    args = container["args"]
    join_as = args[args.index("-join-as") + 1]
    assert users[join_as] & {"all", "join"}
    assert users["*"] == {"ready"}  # the kubelet's probes carry no password
    mounted = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    (volume,) = [v for v in pod["volumes"] if v.get("secret")]
    assert volume["secret"]["secretName"] == "raftflow-credentials"
    assert args[args.index("-auth") + 1] == f"{mounted[volume['name']]}/users.json"

    url = secret["url"]
    worker = urlsplit(url.split(",", 1)[0]).username
    assert worker is not None and users[worker] >= {"execute", "query"}
    hosts = [part.rsplit("@", 1)[-1].removeprefix("http://") for part in url.split(",")]
    assert hosts == [f"rqlite-{i}.{statefulset['spec']['serviceName']}:4001" for i in range(3)]


def test_workers_drain_within_their_grace_period() -> None:
    deployment = k8s_object("Deployment", "raftflow-worker")
    pod = deployment["spec"]["template"]["spec"]
    assert pod["terminationGracePeriodSeconds"] > WorkerOptions().drain_timeout
    (container,) = pod["containers"]
    assert {"name": "metrics", "containerPort": 9464} in container["ports"]
    job = k8s_object("Job", "raftflow-migrate")["spec"]
    assert job["template"]["spec"]["restartPolicy"] in ("OnFailure", "Never")


def test_the_check_catches_misspelt_fields_wrong_types_and_missing_required_ones() -> None:
    container = {"name": "w", "image": "i", "comand": [], "ports": [{"containerPort": "9464"}]}
    bad = {
        "metadata": {"name": "x"},
        "spec": {"replica": 2, "template": {"spec": {"containers": [container]}}},
    }
    assert schema_problems(bad, "V1Deployment", "Deployment") == [
        "Deployment.spec.replica: unknown field of V1DeploymentSpec",
        "Deployment.spec.template.spec.containers[0].comand: unknown field of V1Container",
        "Deployment.spec.template.spec.containers[0].ports[0].containerPort: '9464' is not int",
    ]
    with pytest.raises(ValueError, match="name"):
        client.ApiClient()._ApiClient__deserialize({"image": "i"}, "V1Container")  # type: ignore[attr-defined]
