"""Who may see the dashboard and who may act, and the CSRF check of every action.

- Every request's ``Host`` must be allowed (:mod:`.hosts`): DNS rebinding cannot reach it.
- Bound to a loopback address it may run open (anyone who can reach it is on the
  machine). Bound to anything else it refuses to start without a token or ``--users``
  (:meth:`Settings.from_options`), and then every request is checked.
- A token (``--token-file``, ``RAFTFLOW_UI_TOKEN`` or ``--token``): a shared secret, sent
  as ``Authorization: Bearer <token>`` or entered on the sign-in page.
- ``--users FILE`` (:mod:`.users`): HTTP Basic users, or signed in on the same page; a
  viewer sees everything and may not act.
- A sign-in starts a session (:mod:`.sessions`): a random id in an HttpOnly,
  SameSite=Strict cookie (``Secure`` over TLS or behind ``--secure-cookies``), new at
  every sign-in, ended by signing out or its expiry.
- ``--read-only``: nobody may act (for an rqlite user with ``query`` permission only).
- CSRF: every action is a POST carrying the value of the ``raftflow_csrf`` cookie
  (double submit; the cookie is SameSite=Strict), and a POST whose ``Origin`` names
  another host is refused.

Secrets are compared in constant time (:func:`same`), as bytes: a header or cookie that
is not ASCII is a failed check, never an error.
"""

from __future__ import annotations

import base64
import binascii
import hmac
import ipaddress
import secrets
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from raftflow.engine.ops.ui.hosts import AllowedHosts
from raftflow.engine.ops.ui.sessions import Sessions
from raftflow.engine.ops.ui.users import User, load_users

SESSION_COOKIE = "raftflow_session"
CSRF_COOKIE = "raftflow_csrf"


def same(given: str | None, expected: str) -> bool:
    """Whether ``given`` equals the secret ``expected``, in constant time."""
    if given is None:
        return False
    encode = "utf-8", "surrogatepass"
    return hmac.compare_digest(given.encode(*encode), expected.encode(*encode))


@dataclass(frozen=True)
class Settings:
    """How the dashboard serves: where, to which host names, who may see, who may act."""

    host: str = "127.0.0.1"
    port: int = 8080
    token: str | None = field(default=None, repr=False)
    users: dict[str, User] = field(default_factory=dict, repr=False)
    read_only: bool = False
    allowed_hosts: tuple[str, ...] = ()  # beyond the defaults (:mod:`.hosts`)
    tls_cert: str | None = None
    tls_key: str | None = None
    secure_cookies: bool = False  # behind a reverse proxy that serves HTTPS

    @property
    def open(self) -> bool:
        return self.token is None and not self.users

    @property
    def tls(self) -> bool:
        return self.tls_cert is not None

    @property
    def secure(self) -> bool:
        """Whether browsers reach it over HTTPS (so its cookies are ``Secure``)."""
        return self.tls or self.secure_cookies

    @property
    def hosts(self) -> AllowedHosts:
        return AllowedHosts.for_bind(self.host, self.port, self.allowed_hosts, tls=self.tls)

    @classmethod
    def from_options(
        cls,
        *,
        bind: str = "127.0.0.1:8080",
        token: str | None = None,
        users_file: str | Path | None = None,
        read_only: bool = False,
        allowed_hosts: Sequence[str] = (),
        tls_cert: str | None = None,
        tls_key: str | None = None,
        secure_cookies: bool = False,
    ) -> Settings:
        host, _, port_text = bind.rpartition(":")
        host = host.strip("[]") or "127.0.0.1"
        try:
            port = int(port_text)
        except ValueError:
            raise ValueError(f"--bind {bind!r}: expected HOST:PORT") from None
        if token is not None and len(token) < 16:
            raise ValueError("the token must be at least 16 characters")
        if (tls_cert is None) != (tls_key is None):
            raise ValueError("--tls-cert and --tls-key go together")
        users = load_users(users_file) if users_file else {}
        settings = cls(
            host=host,
            port=port,
            token=token,
            users=users,
            read_only=read_only,
            allowed_hosts=tuple(allowed_hosts),
            tls_cert=tls_cert,
            tls_key=tls_key,
            secure_cookies=secure_cookies,
        )
        settings.hosts  # noqa: B018 - raises ValueError for a bad --allowed-host now
        if settings.open and not is_loopback(host):
            raise ValueError(
                f"refusing to serve the dashboard on {host} without authentication: pass "
                "--token-file (or RAFTFLOW_UI_TOKEN) or --users FILE, or bind to 127.0.0.1"
            )
        return settings


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@dataclass(frozen=True)
class Identity:
    """Who asks: ``name`` for display, whether they may act, whether a session says so."""

    name: str
    can_act: bool
    session: bool = False


def check_password(settings: Settings, username: str, password: str) -> Identity | None:
    """The identity of a ``--users`` user whose password this is, else None."""
    user = settings.users.get(username)
    if user is None or not user.check(password):
        return None
    return Identity(username, user.role == "admin" and not settings.read_only)


def check_token(settings: Settings, token: str | None) -> Identity | None:
    if settings.token is None or not same(token, settings.token):
        return None
    return Identity("token", not settings.read_only)


def identify(
    settings: Settings,
    sessions: Sessions,
    authorization: str | None,
    session_cookie: str | None,
) -> Identity | None:
    """The identity of a request, or None when it must authenticate (runs a slow password
    hash for HTTP Basic: call it off the event loop)."""
    if settings.open:
        return Identity("local", not settings.read_only)
    if session_cookie:
        session = sessions.get(session_cookie)
        if session is not None:
            return Identity(session.name, session.can_act, session=True)
    scheme, _, credentials = (authorization or "").partition(" ")
    if scheme.lower() == "bearer":
        return check_token(settings, credentials)
    if settings.users and scheme.lower() == "basic":
        try:
            decoded = base64.b64decode(credentials, validate=True).decode()
        except (ValueError, binascii.Error):
            return None
        name, _, password = decoded.partition(":")
        return check_password(settings, name, password)
    return None


def new_csrf_token() -> str:
    return secrets.token_hex(16)


def csrf_ok(cookie: str | None, submitted: str | None, origin: str | None, host: str) -> bool:
    """A POST is genuine when its form echoes the CSRF cookie, and its Origin (browsers
    send it on POSTs) names this host."""
    if not cookie or not submitted or not same(submitted, cookie):
        return False
    if origin and origin != "null":
        return origin.split("://", 1)[-1] == host
    return True
