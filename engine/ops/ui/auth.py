"""Who may see the dashboard and who may act, and the CSRF check of every action.

- Bound to a loopback address it may run open (anyone who can reach it is on the
  machine). Bound to anything else it refuses to start without ``--token`` or ``--users``
  (:meth:`Settings.from_options`), and then every request is checked.
- ``--token``: a shared secret, sent as ``Authorization: Bearer <token>`` or entered once
  on the sign-in page, which sets an HttpOnly, SameSite=Strict cookie holding an HMAC of
  it (never the token itself).
- ``--users FILE``: HTTP Basic users, ``[{"username", "password" | "password_sha256",
  "role": "admin" | "viewer"}]``; a viewer sees everything and may not act.
- ``--read-only``: nobody may act (for an rqlite user with ``query`` permission only).
- CSRF: every action is a POST carrying the value of the ``raftflow_csrf`` cookie
  (double submit; the cookie is SameSite=Strict), and a POST whose ``Origin`` names
  another host is refused.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import ipaddress
import json
import secrets
from dataclasses import dataclass, field
from pathlib import Path

SESSION_COOKIE = "raftflow_session"
CSRF_COOKIE = "raftflow_csrf"
ROLES = ("admin", "viewer")


@dataclass(frozen=True)
class User:
    username: str
    password_sha256: str  # hex digest
    role: str = "admin"

    def check(self, password: str) -> bool:
        digest = hashlib.sha256(password.encode()).hexdigest()
        return hmac.compare_digest(digest, self.password_sha256)


@dataclass(frozen=True)
class Settings:
    """How the dashboard serves: where, who may see, who may act."""

    host: str = "127.0.0.1"
    port: int = 8080
    token: str | None = field(default=None, repr=False)
    users: dict[str, User] = field(default_factory=dict, repr=False)
    read_only: bool = False

    @property
    def open(self) -> bool:
        return self.token is None and not self.users

    @classmethod
    def from_options(
        cls,
        *,
        bind: str = "127.0.0.1:8080",
        token: str | None = None,
        users_file: str | Path | None = None,
        read_only: bool = False,
    ) -> Settings:
        host, _, port_text = bind.rpartition(":")
        host = host.strip("[]") or "127.0.0.1"
        try:
            port = int(port_text)
        except ValueError:
            raise ValueError(f"--bind {bind!r}: expected HOST:PORT") from None
        if token is not None and len(token) < 16:
            raise ValueError("--token must be at least 16 characters")
        users = load_users(users_file) if users_file else {}
        settings = cls(host=host, port=port, token=token, users=users, read_only=read_only)
        if settings.open and not is_loopback(host):
            raise ValueError(
                f"refusing to serve the dashboard on {host} without authentication: pass "
                "--token (or RAFTFLOW_UI_TOKEN) or --users FILE, or bind to 127.0.0.1"
            )
        return settings

    def session_value(self) -> str:
        """The sign-in cookie's value: an HMAC of the token, not the token."""
        assert self.token is not None
        return hmac.new(self.token.encode(), b"raftflow-ui-session", hashlib.sha256).hexdigest()


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def load_users(path: str | Path) -> dict[str, User]:
    entries = json.loads(Path(path).read_text(encoding="utf-8"))
    if not isinstance(entries, list):
        raise ValueError(f"{path}: expected a JSON list of users")
    users = {}
    for entry in entries:
        name, role = entry.get("username"), entry.get("role", "admin")
        digest = entry.get("password_sha256")
        if digest is None and "password" in entry:
            digest = hashlib.sha256(str(entry["password"]).encode()).hexdigest()
        if not name or not digest or role not in ROLES:
            raise ValueError(f"{path}: each user needs username, password(_sha256), role {ROLES}")
        users[name] = User(name, str(digest).lower(), role)
    return users


@dataclass(frozen=True)
class Identity:
    """Who asks: ``name`` for display, whether they may act."""

    name: str
    can_act: bool


def identify(
    settings: Settings, authorization: str | None, session_cookie: str | None
) -> Identity | None:
    """The identity of a request, or None when it must authenticate."""
    if settings.open:
        return Identity("local", not settings.read_only)
    scheme, _, credentials = (authorization or "").partition(" ")
    if settings.token is not None:
        if scheme.lower() == "bearer" and hmac.compare_digest(credentials, settings.token):
            return Identity("token", not settings.read_only)
        if session_cookie and hmac.compare_digest(session_cookie, settings.session_value()):
            return Identity("token", not settings.read_only)
    if settings.users and scheme.lower() == "basic":
        try:
            decoded = base64.b64decode(credentials).decode()
        except ValueError:
            return None
        name, _, password = decoded.partition(":")
        user = settings.users.get(name)
        if user is not None and user.check(password):
            return Identity(name, user.role == "admin" and not settings.read_only)
    return None


def new_csrf_token() -> str:
    return secrets.token_hex(16)


def csrf_ok(cookie: str | None, submitted: str | None, origin: str | None, host: str) -> bool:
    """A POST is genuine when its form echoes the CSRF cookie, and its Origin (browsers
    send it on POSTs) names this host."""
    if not cookie or not submitted or not hmac.compare_digest(cookie, submitted):
        return False
    if origin and origin != "null":
        return origin.split("://", 1)[-1] == host
    return True
