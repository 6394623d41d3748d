"""Progress on stderr: one line per phase, whose counter is rewritten in place on a
terminal (and printed every few seconds otherwise, so logs show a stuck phase too)."""

from __future__ import annotations

import sys
import time
from typing import TextIO


class Progress:
    def __init__(self, phases: int, stream: TextIO | None = None) -> None:
        self.phases = phases
        self.number = 0
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty()
        self._title = ""
        self._started = 0.0
        self._last_print = 0.0

    def start(self, title: str) -> None:
        self.number += 1
        self._title = title
        self._started = self._last_print = time.monotonic()
        self._write("...", final=False)

    def update(self, counter: str) -> None:
        now = time.monotonic()
        if self.tty or now - self._last_print >= 5.0:
            self._last_print = now
            self._write(counter, final=False)

    def done(self, summary: str) -> None:
        self._write(summary, final=True)

    def note(self, text: str) -> None:
        self.stream.write(f"{text}\n")
        self.stream.flush()

    def _write(self, text: str, *, final: bool) -> None:
        elapsed = time.monotonic() - self._started
        line = f"[{self.number}/{self.phases}] {self._title:<34} {text}  ({elapsed:.1f}s)"
        if self.tty:
            self.stream.write("\r\033[K" + line + ("\n" if final else ""))
        elif final or text != "...":
            self.stream.write(line + "\n")
        else:
            self.stream.write(f"[{self.number}/{self.phases}] {self._title} ...\n")
        self.stream.flush()
