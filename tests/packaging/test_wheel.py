"""What ``pip install raftflow`` puts on a machine: one top-level package, ``raftflow``.

The wheel is built from this checkout and installed into a fresh virtualenv; the demo and
a cluster-free workflow then run from a folder holding an application's own ``engine.py``,
``transports/`` and ``stores.py`` -- the module names a raftflow that installed its three
folders at the top level would collide with.
"""

from __future__ import annotations

import subprocess
import tarfile
import textwrap
import zipfile
from pathlib import Path

import pytest
import tomllib

from tests import background

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow

APP = """
from pydantic import BaseModel
from raftflow import Engine, current_step

engine = Engine.from_url("sqlite:///app.db")


class Order(BaseModel):
    id: str
    amount: float


@engine.step
def charge(order_id: str, amount: float) -> str:
    return f"charged {order_id} {amount} as {current_step().key}"


@engine.workflow
def checkout(order: Order) -> str:
    return charge(order.id, order.amount)


handle = engine.start(checkout, Order(id="o1", amount=9.5), execution_id="e1")
with engine.running_worker():
    print(handle.result(timeout=30))
"""


def _run(*args: str | Path, cwd: Path | None = None) -> str:
    done = subprocess.run(
        [str(a) for a in args], cwd=cwd, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, f"{args} failed:\n{done.stdout}\n{done.stderr}"
    return done.stdout


@pytest.fixture(scope="module")
def built(request: pytest.FixtureRequest) -> Path:
    """The wheel, the sdist and a virtualenv with the wheel installed
    (tests/packaging/build.py; in a whole-suite run, built since the session began)."""
    job = background.job("packages", request)
    code, output = job.wait(timeout=600)
    assert code == 0, output[-5000:]
    return job.folder


@pytest.fixture(scope="module")
def dist(built: Path) -> Path:
    return built / "dist"


@pytest.fixture(scope="module")
def installed(built: Path) -> Path:
    return built / "venv"


def test_the_wheel_holds_one_top_level_package_and_the_sql(dist: Path) -> None:
    (wheel,) = dist.glob("raftflow-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
    assert {n.split("/")[0] for n in names} == {
        "raftflow",
        wheel.name.split("-py3")[0] + ".dist-info",
    }
    for path in (
        "raftflow/transports/queue.sql",
        "raftflow/stores/store.sql",
        "raftflow/stores/ops.sql",
        "raftflow/stores/schedules.sql",
        "raftflow/transports/db/migrations/0008_schedules_and_retention.sql",
        "raftflow/transports/db/migrations/0004_operations.sql",
        "raftflow/engine/ops/ui/templates/execution.html",
        "raftflow/engine/ops/ui/static/style.css",
        "raftflow/engine/ops/ui/static/live.js",
        "raftflow/py.typed",
    ):
        assert path in names, path


def test_the_sdist_holds_the_sources_and_the_sql(dist: Path) -> None:
    (sdist,) = dist.glob("raftflow-*.tar.gz")
    with tarfile.open(sdist) as archive:
        names = {n.split("/", 1)[1] for n in archive.getnames() if "/" in n}
    for path in (
        "pyproject.toml",
        "raftflow/__init__.py",
        "engine/app.py",
        "transports/queue.sql",
        "stores/store.sql",
    ):
        assert path in names, path


def test_installed_it_adds_only_raftflow_to_site_packages(installed: Path, tmp_path: Path) -> None:
    (site,) = installed.glob("lib/python*/site-packages")
    (info,) = site.glob("raftflow-*.dist-info")
    tops = {line.split("/")[0].split(",")[0] for line in (info / "RECORD").read_text().splitlines()}
    assert tops - {".."} == {"raftflow", info.name}  # ".." is the raftflow script in bin/
    # Away from this checkout, whose raftflow/ folder would shadow the installed package.
    version = _run(installed / "bin" / "raftflow", "--version", cwd=tmp_path).strip()
    script = "import raftflow; print(raftflow.__version__)"
    meta = _run(installed / "bin" / "python", "-c", script, cwd=tmp_path)
    expected = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert version == f"raftflow {expected}" and meta.strip() == expected


def test_an_app_with_its_own_engine_transports_and_stores_runs(
    installed: Path, tmp_path: Path
) -> None:
    app = tmp_path / "shop"
    (app / "transports").mkdir(parents=True)
    trap = 'raise RuntimeError("the application\'s own {} was imported by raftflow")\n'
    (app / "engine.py").write_text(trap.format("engine.py"))
    (app / "transports" / "__init__.py").write_text(trap.format("transports/"))
    (app / "stores.py").write_text(trap.format("stores.py"))
    (app / "app.py").write_text(textwrap.dedent(APP))
    python = installed / "bin" / "python"
    assert _run(python, "app.py", cwd=app).strip() == "charged o1 9.5 as e1/0"
    demo = _run(installed / "bin" / "raftflow", "demo", "--executions", "3", cwd=app)
    assert "3 executions, 12 steps, all succeeded" in demo


def test_the_package_list_covers_every_package_folder() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    mapping = config["package-dir"]
    listed = set(config["packages"])
    found = set()
    for name, folder in mapping.items():
        for init in (ROOT / folder).rglob("__init__.py"):
            relative = init.parent.relative_to(ROOT / folder).parts
            found.add(".".join((name, *relative)))
    assert found == listed
