"""The sign-in page and signing out: each sign-in starts a new session (:mod:`.sessions`)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from raftflow.engine.ops.ui.auth import (
    SESSION_COOKIE,
    Identity,
    Settings,
    check_password,
    check_token,
)
from raftflow.engine.ops.ui.guard import csrf_passes
from raftflow.engine.ops.ui.sessions import Sessions
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response
from starlette.routing import Route

Form = Callable[[Request], Awaitable[dict[str, str]]]


def signin_routes(
    settings: Settings, sessions: Sessions, page: Callable[..., Response], form_of: Form
) -> list[Route]:
    """``/login`` (GET: the form; POST: sign in) and ``/logout`` (POST, CSRF-checked)."""

    kinds = {"users": bool(settings.users), "token": settings.token is not None}

    def signed_in(identity: Identity) -> Response:
        response = RedirectResponse("/executions", status_code=303)
        response.set_cookie(
            SESSION_COOKIE,
            sessions.create(identity.name, identity.can_act),
            max_age=int(sessions.ttl),
            httponly=True,
            samesite="strict",
            secure=settings.secure,
        )
        return response

    async def login(request: Request) -> Response:
        if request.method == "GET":
            return page(request, "login.html", error=None, **kinds)
        form = await form_of(request)
        identity: Identity | None = None
        if form.get("username"):
            identity = await run_in_threadpool(
                check_password, settings, form["username"], form.get("password", "")
            )
        elif form.get("token"):
            identity = check_token(settings, form["token"])
        if identity is None:
            return page(
                request,
                "login.html",
                status_code=401,
                error="wrong credentials",
                **kinds,
            )
        return signed_in(identity)

    async def logout(request: Request) -> Response:
        if not csrf_passes(request, await form_of(request)):
            return PlainTextResponse("CSRF check failed: reload the page", status_code=403)
        session_id = request.cookies.get(SESSION_COOKIE)
        if session_id:
            sessions.revoke(session_id)
        response = RedirectResponse("/login" if not settings.open else "/", status_code=303)
        response.delete_cookie(
            SESSION_COOKIE, httponly=True, samesite="strict", secure=settings.secure
        )
        return response

    routes: list[Any] = [
        Route("/login", login, methods=["GET", "POST"]),
        Route("/logout", logout, methods=["POST"]),
    ]
    return routes
