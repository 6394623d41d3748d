"""Times and durations as the command line and the dashboard show them (local time)."""

from __future__ import annotations

import datetime as dt

#: Duration units: compact for the command line's tables, spelled for the dashboard.
_COMPACT = ("ms", "s", "m", "h", "d")
_SPELLED = (" ms", " s", " min", " h", " d")


def format_time(ts: float | None) -> str:
    """An epoch time in local time to the second, or ``-``."""
    if ts is None:
        return "-"
    return dt.datetime.fromtimestamp(ts).strftime("%Y-%m-%d %H:%M:%S")


def format_duration(seconds: float | None, *, spelled: bool = False) -> str:
    """``seconds`` in the largest unit that keeps it readable (``-`` for None; a negative
    duration, from clocks that disagree, shows as 0)."""
    if seconds is None:
        return "-"
    ms, s, m, h, d = _SPELLED if spelled else _COMPACT
    seconds = max(0.0, seconds)
    if seconds < 1:
        return f"{seconds * 1000:.0f}{ms}"
    if seconds < 120:
        return f"{seconds:.1f}{s}"
    if seconds < 7200:
        return f"{seconds / 60:.0f}{m}"
    if seconds < 172800:
        return f"{seconds / 3600:.1f}{h}"
    return f"{seconds / 86400:.1f}{d}"
