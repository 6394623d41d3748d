"""The app's Engine, loaded from ``MODULE:ATTRIBUTE`` (``--app``, ``raftflow worker APP``)."""

from __future__ import annotations

import importlib
import os
import sys
import traceback
from collections.abc import Callable
from typing import Any, TypeVar

import click
from raftflow.engine.app import Engine

from raftflow.errors import ConfigurationError

F = TypeVar("F", bound=Callable[..., Any])


def app_option(help: str, *, required: bool = True) -> Callable[[F], F]:
    """``--app MODULE:ENGINE`` (default ``$RAFTFLOW_APP``); ``help`` says what for."""
    return click.option(
        "--app",
        envvar="RAFTFLOW_APP",
        show_envvar=True,
        required=required,
        metavar="MODULE:ENGINE",
        help=help,
    )


def load_engine(spec: str) -> Engine:
    """``module:attribute`` (``raftflow.engine.ops.demo:engine``) to the Engine it names;
    :class:`ConfigurationError` in one line (exit 2) for anything else, including a
    module that cannot be imported (the line says where its import failed)."""
    module_name, _, attribute = spec.partition(":")
    if not module_name or not attribute:
        raise ConfigurationError(f"app {spec!r}: expected MODULE:ATTRIBUTE, e.g. myapp:engine")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name is not None and f"{module_name}.".startswith(f"{exc.name}."):
            raise ConfigurationError(
                f"app {spec!r}: no module named {exc.name!r} (run the command from the app's "
                "directory, or add it to PYTHONPATH)"
            ) from None
        raise ConfigurationError(f"app {spec!r}: importing it failed: {_failure(exc)}") from None
    except Exception as exc:  # the app's own code failed on import
        raise ConfigurationError(f"app {spec!r}: importing it failed: {_failure(exc)}") from None
    engine = getattr(module, attribute, None)
    if not isinstance(engine, Engine):
        found = "nothing" if engine is None else f"a {type(engine).__name__}"
        raise ConfigurationError(
            f"app {spec!r}: {module_name}.{attribute} is {found}, not an Engine"
        )
    return engine


def _failure(exc: BaseException) -> str:
    """An exception in one line, with where it was raised (the innermost frame)."""
    if isinstance(exc, SyntaxError):  # raised by the compiler: no frame of the app's file
        where = f" ({exc.filename}, line {exc.lineno})"
    else:
        frames = traceback.extract_tb(exc.__traceback__)
        where = f" ({frames[-1].filename}, line {frames[-1].lineno})" if frames else ""
    message = str(exc).splitlines()[0] if str(exc) else ""
    return f"{type(exc).__name__}: {message}{where}"
