"""The dashboard's middleware: the Host allow-list first (:mod:`.hosts`), then who asks
(:mod:`.auth`), the CSRF cookie, security headers and the error pages."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from raftflow.engine.ops.ui.auth import (
    CSRF_COOKIE,
    SESSION_COOKIE,
    Identity,
    Settings,
    csrf_ok,
    identify,
    new_csrf_token,
)
from raftflow.engine.ops.ui.hosts import HostGuard
from raftflow.engine.ops.ui.sessions import Sessions
from starlette.concurrency import run_in_threadpool
from starlette.middleware import Middleware
from starlette.middleware.base import BaseHTTPMiddleware
from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response

from raftflow.errors import (
    ExecutionFinishedError,
    ExecutionNotFoundError,
    InvalidArgumentError,
    UnavailableError,
)

PUBLIC = ("/login", "/static/", "/healthz")
SECURITY_HEADERS = {
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "Content-Security-Policy": "default-src 'self'; style-src 'self' 'unsafe-inline'; "
    "script-src 'self'; form-action 'self'; frame-ancestors 'none'",
}


def middleware(
    settings: Settings, sessions: Sessions, page: Callable[..., Response]
) -> list[Middleware]:
    """The dashboard's middleware stack, outermost first."""
    return [
        Middleware(HostGuard, allowed=settings.hosts),
        Middleware(_Guard, settings=settings, sessions=sessions, page=page),
    ]


def csrf_passes(request: Request, form: dict[str, str]) -> bool:
    """Whether a POST's form echoes the CSRF cookie and its Origin names this host."""
    return csrf_ok(
        request.cookies.get(CSRF_COOKIE),
        form.get("csrf"),
        request.headers.get("origin"),
        request.headers.get("host", ""),
    )


class _Guard(BaseHTTPMiddleware):
    """Authentication, the CSRF cookie, security headers and error pages."""

    def __init__(
        self, app: Any, settings: Settings, sessions: Sessions, page: Callable[..., Response]
    ) -> None:
        super().__init__(app)
        self.settings = settings
        self.sessions = sessions
        self.page = page

    async def dispatch(
        self, request: Request, call_next: Callable[[Request], Awaitable[Response]]
    ) -> Response:
        path = request.url.path
        identity = await run_in_threadpool(
            identify,
            self.settings,
            self.sessions,
            request.headers.get("authorization"),
            request.cookies.get(SESSION_COOKIE),
        )
        if identity is None and not path.startswith(PUBLIC):
            return self._challenge(request)
        request.state.identity = identity or Identity("anonymous", False)
        csrf = request.cookies.get(CSRF_COOKIE) or new_csrf_token()
        request.state.csrf = csrf
        try:
            response = await call_next(request)
        except ExecutionNotFoundError as exc:
            response = self.page(request, "error.html", 404, title="Not found", message=str(exc))
        except (ExecutionFinishedError, InvalidArgumentError) as exc:
            response = self.page(request, "error.html", 400, title="Refused", message=str(exc))
        except UnavailableError as exc:
            response = self.page(
                request, "error.html", 503, title="Cluster unavailable", message=str(exc)
            )
        if CSRF_COOKIE not in request.cookies:
            response.set_cookie(
                CSRF_COOKIE, csrf, httponly=True, samesite="strict", secure=self.settings.secure
            )
        for name, value in SECURITY_HEADERS.items():
            response.headers.setdefault(name, value)
        return response

    def _challenge(self, request: Request) -> Response:
        if "text/html" in request.headers.get("accept", ""):
            return RedirectResponse("/login", status_code=303)
        headers = {"WWW-Authenticate": 'Basic realm="raftflow"'} if self.settings.users else {}
        return PlainTextResponse("authentication required", status_code=401, headers=headers)
