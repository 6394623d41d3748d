"""Times on the command line: ``--since`` read, times and durations shown."""

from __future__ import annotations

import datetime as dt
import re
import time

import click

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*$")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def parse_since(text: str | None, *, now: float | None = None) -> float:
    """``--since``: a duration back from now (``30s``, ``15m``, ``2h``, ``7d``), an ISO
    date or time (``2026-05-01``, ``2026-05-01T12:00``, local time unless it says), or
    epoch seconds; None means from the beginning (0)."""
    if text is None or not text.strip():
        return 0.0
    now = time.time() if now is None else now
    match = _DURATION.match(text)
    if match:
        return now - float(match.group(1)) * _UNITS[match.group(2)]
    try:
        return float(text)
    except ValueError:
        pass
    try:
        moment = dt.datetime.fromisoformat(text.strip())
    except ValueError:
        raise click.BadParameter(
            f"{text!r}: use a duration (15m, 2h, 7d), an ISO date/time or epoch seconds",
            param_hint="--since",
        ) from None
    if moment.tzinfo is None:
        moment = moment.astimezone()
    return moment.timestamp()
