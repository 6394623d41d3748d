"""The dashboard: server-rendered pages (Starlette + Jinja2), plain forms, one small script
for the live counts; no JavaScript build step.

Every page is one read request (:class:`~raftflow.stores.inspect.Inspector`, and the
schedules' list of :class:`~raftflow.engine.runtime.schedules.ScheduleFlows`; ``weak``: no Raft
entry, no lock held beyond the statement), so what a page shows is one consistent state of
the database. On a sharded deployment (:mod:`raftflow.engine.ops.scatter`) a list is one
such read on each cluster, merged, and an execution's page reads its own cluster.
Actions (cancel, send a signal, resume, fork) are the engine's own one-request calls
(routed to the execution's cluster), each behind a confirmation page and a CSRF-checked
POST (:mod:`.auth`).
"""

from __future__ import annotations

import datetime as dt
import functools
import json
import sys
import time
import urllib.parse
from pathlib import Path
from typing import TYPE_CHECKING, Any
from zoneinfo import ZoneInfo

from raftflow.engine.ops.scatter import inspector_of
from raftflow.engine.ops.timefmt import format_time
from raftflow.engine.ops.ui.auth import Identity, Settings, is_loopback
from raftflow.engine.ops.ui.guard import csrf_passes, middleware
from raftflow.engine.ops.ui.hosts import WILDCARDS
from raftflow.engine.ops.ui.sessions import Sessions
from raftflow.engine.ops.ui.signin import signin_routes
from raftflow.engine.ops.ui.streams import stream_routes
from raftflow.engine.ops.ui.timeline import durations, format_age, timeline
from raftflow.engine.workflow.queues import lane_parts
from raftflow.stores.records import Status
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates

from raftflow.errors import ExecutionNotFoundError, InvalidArgumentError

if TYPE_CHECKING:
    from raftflow.engine.app import Engine

__all__ = ["Settings", "create_app", "serve"]

HERE = Path(__file__).parent
WINDOWS = {"1h": 3600, "24h": 86400, "7d": 7 * 86400, "all": None}


def execution_url(execution_id: str) -> str:
    return "/executions/" + urllib.parse.quote(execution_id, safe="/")


def zoned(ts: float, timezone: str) -> tuple[float, str]:
    """A fire time, and how it reads in its schedule's time zone."""
    return ts, dt.datetime.fromtimestamp(ts, tz=ZoneInfo(timezone)).strftime("%Y-%m-%d %H:%M:%S %Z")


def number_param(
    request: Request, name: str, default: float, low: float, high: float, kind: type = int
) -> Any:
    """A numeric query parameter clamped to [low, high]; 400 with a clear message when it
    is not a number (not a 500 from deep inside a page)."""
    text = request.query_params.get(name)
    if not text:
        return kind(default)
    try:
        value = kind(text)
    except ValueError:
        raise HTTPException(400, f"{name} must be a number, not {text[:40]!r}") from None
    if value != value:  # NaN
        raise HTTPException(400, f"{name} must be a number, not {text[:40]!r}")
    return min(max(value, kind(low)), kind(high))


def create_app(engine: Engine, settings: Settings, sessions: Sessions | None = None) -> Starlette:
    """The dashboard's ASGI app on a connected ``engine`` (``sessions``: where sign-ins
    are kept, a new :class:`Sessions` by default)."""
    sessions = sessions if sessions is not None else Sessions()
    inspector = inspector_of(engine)  # sharded: lists merged, an execution on its cluster
    templates = Jinja2Templates(directory=str(HERE / "templates"))
    env = templates.env
    env.filters["time"] = format_time
    env.filters["age"] = format_age
    env.filters["tojson_pretty"] = lambda v: json.dumps(v, indent=2, sort_keys=True)
    env.globals["execution_url"] = execution_url
    env.globals["cluster_of"] = inspector.cluster_of

    def page(request: Request, name: str, status_code: int = 200, **context: Any) -> Response:
        identity: Identity = request.state.identity
        context.update(
            sharded=inspector.sharded,
            identity=identity,
            read_only=not identity.can_act,
            csrf=request.state.csrf,
            nav=name.split(".")[0],
        )
        return templates.TemplateResponse(request, name, context, status_code=status_code)

    def executions(request: Request) -> Response:
        q = request.query_params
        status = q.get("status") or None
        workflow = q.get("workflow") or None
        window = q.get("window") or "24h"
        window = window if window in WINDOWS else "24h"
        seconds = WINDOWS[window]
        now = inspector.now()
        since = 0.0 if seconds is None else now - seconds
        limit = number_param(request, "limit", 100, 1, 1000)
        records = inspector.list(
            status=Status(status) if status in {s.value for s in Status} else None,
            workflow=workflow,
            since=since,
            limit=limit,
        )
        counts = {s.value: n for s, n in inspector.counts(since).items()}
        return page(
            request,
            "executions.html",
            records=records,
            counts=counts,
            now=now,
            statuses=[s.value for s in Status],
            status=status,
            workflow=workflow or "",
            window=window,
            windows=list(WINDOWS),
            limit=limit,
        )

    def counts(request: Request) -> Response:
        window = request.query_params.get("window", "24h")
        seconds = WINDOWS.get(window, 86400)
        since = 0.0 if seconds is None else inspector.now() - seconds
        return JSONResponse({s.value: n for s, n in inspector.counts(since).items()})

    def execution(request: Request) -> Response:
        detail = inspector.detail(request.path_params["execution_id"])
        streams = engine.streams(detail.execution.id)  # the live values: stream_routes
        return page(
            request,
            "execution.html",
            d=detail,
            e=detail.execution,
            rows=timeline(detail),
            took=durations(detail),
            streams=streams,
            cluster=inspector.cluster_of(detail.execution.id),
        )

    def queue(request: Request) -> Response:
        lanes = [(lane_parts(d.lane) or ("-", "(any)", None), d) for d in inspector.lanes()]
        return page(request, "queue.html", q=inspector.queue(), lanes=lanes)

    def schedules(request: Request) -> Response:
        count = number_param(request, "next", 3, 1, 20)
        found = inspector.schedules()
        rows = [(info, [zoned(t, info.timezone) for t in info.next_times(count)]) for info in found]
        return page(request, "schedules.html", rows=rows, now=inspector.now(), count=count)

    def workers(request: Request) -> Response:
        within = number_param(request, "within", 60.0, 1.0, 86_400.0, float)
        return page(
            request,
            "workers.html",
            workers=inspector.workers(within),
            now=inspector.now(),
            within=within,
        )

    def confirm(request: Request) -> Response:
        action = request.url.path.strip("/")
        execution_id = request.query_params.get("id", "")
        record = engine.store_of(execution_id).get(execution_id)
        if record is None:
            raise ExecutionNotFoundError(f"no execution has id {execution_id!r}")
        calls = len(engine.get(execution_id).steps()) if action == "fork" else 0
        return page(request, "confirm.html", action=action, e=record, calls=calls)

    async def act(request: Request) -> Response:
        form = await _form(request)
        if not request.state.identity.can_act:
            return PlainTextResponse("this dashboard is read-only for you", status_code=403)
        if not csrf_passes(request, form):
            return PlainTextResponse("CSRF check failed: reload the page", status_code=403)
        execution_id = form.get("id", "")
        if request.url.path == "/cancel":
            await run_in_threadpool(engine.cancel, execution_id)
        elif request.url.path == "/resume":
            if not await run_in_threadpool(engine.resume, execution_id):
                raise InvalidArgumentError(
                    f"{execution_id!r} is neither failed nor cancelled: nothing to resume"
                )
        elif request.url.path == "/fork":
            from_step = _whole_number(form.get("from_step", ""), "from_step")
            fork = functools.partial(engine.fork, new_execution_id=form.get("new_id") or None)
            execution_id = (await run_in_threadpool(fork, execution_id, from_step)).id
        else:
            topic = form.get("topic") or None
            try:
                message = json.loads(form.get("message") or "null")
            except ValueError as exc:
                raise InvalidArgumentError(f"the message is not JSON: {exc}") from None
            await run_in_threadpool(engine.send, execution_id, message, topic)
        return RedirectResponse(execution_url(execution_id), status_code=303)

    async def healthz(request: Request) -> Response:
        return PlainTextResponse("ok")

    routes = [
        Route("/", lambda request: RedirectResponse("/executions")),
        Route("/executions", executions),
        Route("/executions/{execution_id:path}", execution),
        Route("/api/counts", counts),
        Route("/queue", queue),
        Route("/workers", workers),
        Route("/schedules", schedules),
        Route("/cancel", confirm, methods=["GET"]),
        Route("/send", confirm, methods=["GET"]),
        Route("/resume", confirm, methods=["GET"]),
        Route("/fork", confirm, methods=["GET"]),
        Route("/cancel", act, methods=["POST"]),
        Route("/send", act, methods=["POST"]),
        Route("/resume", act, methods=["POST"]),
        Route("/fork", act, methods=["POST"]),
        *stream_routes(engine),
        *signin_routes(settings, sessions, page, _form),
        Route("/healthz", healthz),
        Mount("/static", StaticFiles(directory=str(HERE / "static")), name="static"),
    ]
    return Starlette(routes=routes, middleware=middleware(settings, sessions, page))


def _whole_number(text: str, name: str) -> int:
    try:
        return int(text.strip())
    except ValueError:
        raise InvalidArgumentError(f"{name} must be a whole number, not {text[:40]!r}") from None


async def _form(request: Request) -> dict[str, str]:
    """An urlencoded form (without python-multipart: the dashboard posts nothing else)."""
    body = (await request.body()).decode("utf-8", "replace")
    return {k: v[-1] for k, v in urllib.parse.parse_qs(body, keep_blank_values=True).items()}


def serve(engine: Engine, settings: Settings) -> None:
    """Serve the dashboard until Ctrl-C (uvicorn; HTTPS with ``settings.tls_cert``)."""
    import uvicorn

    app = create_app(engine, settings)
    auth = "open (loopback)" if settings.open else "authenticated"
    mode = ", read-only" if settings.read_only else ""
    scheme = "https" if settings.tls else "http"
    print(
        f"raftflow dashboard on {scheme}://{settings.host}:{settings.port}/ ({auth}{mode})",
        flush=True,
    )
    for line in startup_warnings(settings):
        print(f"warning: {line}", file=sys.stderr, flush=True)
    started = time.monotonic()
    uvicorn.run(
        app,
        host=settings.host,
        port=settings.port,
        log_level="warning",
        access_log=False,
        ssl_certfile=settings.tls_cert,
        ssl_keyfile=settings.tls_key,
    )
    print(f"dashboard stopped after {time.monotonic() - started:.0f}s", flush=True)


def startup_warnings(settings: Settings) -> list[str]:
    """What an operator should know about how this dashboard is exposed."""
    warnings = []
    if not settings.open and not settings.secure and not is_loopback(settings.host):
        warnings.append(
            "sign-ins and session cookies cross the network in clear text: pass --tls-cert "
            "and --tls-key, or serve it behind an HTTPS reverse proxy with --secure-cookies"
        )
    if settings.host in WILDCARDS and not settings.allowed_hosts:
        warnings.append(
            f"listening on {settings.host or 'all addresses'}, it answers only requests for "
            "localhost: name the others with --allowed-host (this machine's name, a proxy's)"
        )
    return warnings
