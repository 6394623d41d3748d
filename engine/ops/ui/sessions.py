"""Signed-in sessions: a random id per sign-in, held in this process's memory.

The cookie holds only the id (32 random bytes); what it stands for -- who signed in,
whether they may act, until when -- stays on the server. Every sign-in gets a new id,
signing out revokes it at once, an id past its expiry is refused and forgotten, and a
restart of the dashboard signs everyone out.
"""

from __future__ import annotations

import hashlib
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

#: How long a sign-in lasts.
SESSION_SECONDS = 12 * 3600


@dataclass(frozen=True)
class Session:
    name: str
    can_act: bool
    expires_at: float  # on the store's clock


class Sessions:
    """The live sessions (at most ``limit``: the oldest go first beyond it)."""

    def __init__(
        self,
        ttl: float = SESSION_SECONDS,
        *,
        clock: Callable[[], float] = time.monotonic,
        limit: int = 10_000,
    ) -> None:
        self.ttl = ttl
        self._clock = clock
        self._limit = limit
        # Keyed by a digest of the id: a lookup's timing says nothing about live ids.
        self._live: dict[bytes, Session] = {}
        self._lock = threading.Lock()

    @staticmethod
    def _key(session_id: str) -> bytes:
        return hashlib.sha256(session_id.encode("utf-8", "surrogatepass")).digest()

    def create(self, name: str, can_act: bool) -> str:
        """A new session's id (for the cookie)."""
        session_id = secrets.token_urlsafe(32)
        now = self._clock()
        with self._lock:
            for key in [k for k, s in self._live.items() if s.expires_at <= now]:
                del self._live[key]
            while len(self._live) >= self._limit:
                del self._live[next(iter(self._live))]
            self._live[self._key(session_id)] = Session(name, can_act, now + self.ttl)
        return session_id

    def get(self, session_id: str) -> Session | None:
        """The live session ``session_id`` names, or None (unknown, revoked or expired)."""
        key = self._key(session_id)
        with self._lock:
            session = self._live.get(key)
            if session is not None and session.expires_at <= self._clock():
                del self._live[key]
                return None
        return session

    def revoke(self, session_id: str) -> None:
        with self._lock:
            self._live.pop(self._key(session_id), None)

    def __len__(self) -> int:
        return len(self._live)
