"""Start rqlited child processes and keep track of them.

Every process started through :func:`start_process` is registered, so that an ``atexit`` hook
and the pytest plugin can kill what is still alive (:func:`kill_all_started`). Only processes
started by this Python process are ever signalled. Children run in their own session and,
when started from the main thread, get SIGKILL when their parent dies (``PR_SET_PDEATHSIG``).
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Sequence
from typing import IO

__all__ = ["forget", "kill_all_started", "start_process", "started_pids"]

_registry_lock = threading.Lock()
_started: set[subprocess.Popen[bytes]] = set()
_atexit_registered = False


def _register(process: subprocess.Popen[bytes]) -> None:
    global _atexit_registered
    with _registry_lock:
        _started.add(process)
        if not _atexit_registered:
            atexit.register(kill_all_started)
            _atexit_registered = True


def forget(process: subprocess.Popen[bytes]) -> None:
    """Drop a process that has been reaped from the registry."""
    with _registry_lock:
        _started.discard(process)


def started_pids() -> list[int]:
    """PIDs of the rqlited processes started by this Python process and still running."""
    with _registry_lock:
        return [p.pid for p in _started if p.poll() is None]


def kill_all_started() -> list[int]:
    """SIGKILL every rqlited this Python process started that is still running; reap them.

    Returns the PIDs that had to be killed.
    """
    with _registry_lock:
        processes = list(_started)
        _started.clear()
    killed = []
    for process in processes:
        if process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            killed.append(process.pid)
    for process in processes:
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=5)
    return killed


# --------------------------------------------------------------------------- child setup

_PR_SET_PDEATHSIG = 1
_prctl: Callable[..., int] | None = None


def _load_prctl() -> Callable[..., int] | None:
    """Resolve libc's prctl in the parent: the child must not load libraries after fork."""
    global _prctl
    if _prctl is None and sys.platform.startswith("linux"):
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            _prctl = libc.prctl
        except (OSError, AttributeError):
            _prctl = None
    return _prctl


def _child_setup_factory() -> Callable[[], None] | None:
    """A preexec_fn that makes the child get SIGKILL when its parent dies.

    PR_SET_PDEATHSIG fires when the *thread* that forked the child exits, not the process, so
    it is only used when starting from the main thread; nodes started from other threads rely on
    the atexit hook instead.
    """
    if threading.current_thread() is not threading.main_thread():
        return None
    prctl = _load_prctl()
    if prctl is None:
        return None
    parent_pid = os.getpid()

    def setup() -> None:
        prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != parent_pid:  # the parent died before prctl took effect
            os._exit(1)

    return setup


def start_process(args: Sequence[str], *, log: IO[bytes]) -> subprocess.Popen[bytes]:
    """Start ``args`` in a new session, stdout and stderr into ``log``, and register it."""
    process = subprocess.Popen(
        args,
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        preexec_fn=_child_setup_factory(),
        close_fds=True,
    )
    _register(process)
    return process
