"""The dashboard's security, on its ASGI app over an embedded SQLite engine (Starlette's
test client): the Host allow-list against DNS rebinding, headers and cookies that are not
ASCII, sessions (random per sign-in, revocable, expiring), salted password hashes and
Secure cookies. The real server (TLS, --token-file) is tests/integration/test_dashboard_tls.py."""

from __future__ import annotations

import base64
import json
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from raftflow.engine import Engine
from raftflow.engine.ops.ui.server import Settings, create_app
from raftflow.stores.inspect import Inspector

with warnings.catch_warnings():  # Starlette 1.x would rather have httpx2; httpx is here
    warnings.filterwarnings("ignore", "Using `httpx` with `starlette.testclient`")
    from starlette.testclient import TestClient

TOKEN = "correct-horse-battery-staple"
BASE = "http://127.0.0.1:8080"


@pytest.fixture()
def engine(tmp_path: Path) -> Iterator[Engine]:
    engine = Engine()

    @engine.workflow
    def waits() -> Any:
        return None

    engine.connect(f"sqlite:///{tmp_path / 'ui.db'}")
    engine.start(waits, execution_id="target")
    try:
        yield engine
    finally:
        engine.close()


def client(
    engine: Engine, settings: Settings, sessions: Any = None, raise_server_exceptions: bool = True
) -> TestClient:
    app = (
        create_app(engine, settings) if sessions is None else create_app(engine, settings, sessions)
    )
    return TestClient(app, base_url=BASE, raise_server_exceptions=raise_server_exceptions)


def signals(engine: Engine) -> list[Any]:
    return Inspector(engine.store.database).detail("target").signals


# -- 1. the Host allow-list ---------------------------------------------------------------


def test_a_rebound_host_with_a_valid_csrf_token_cannot_send_a_signal(engine: Engine) -> None:
    with client(engine, Settings()) as browser:
        assert browser.get("/send?id=target").status_code == 200
        csrf = browser.cookies["raftflow_csrf"]
        evil = "evil.example:8080"
        response = browser.post(
            "/send",
            data={"id": "target", "topic": "t", "message": "1", "csrf": csrf},
            headers={"Host": evil, "Origin": f"http://{evil}"},
            follow_redirects=False,
        )
        assert response.status_code == 421 and evil not in response.text
        assert signals(engine) == []
        allowed = browser.post(
            "/send",
            data={"id": "target", "topic": "t", "message": "1", "csrf": csrf},
            headers={"Origin": BASE},
            follow_redirects=False,
        )
        assert allowed.status_code == 303 and len(signals(engine)) == 1


PATHS = ("/executions", "/healthz", "/static/style.css", "/api/counts")


@pytest.mark.parametrize(
    ("host", "allowed"),
    [
        ("127.0.0.1:8080", True),
        ("localhost:8080", True),
        ("LOCALHOST:8080", True),
        ("[::1]:8080", True),
        ("evil.example:8080", False),
        ("evil.example", False),
        ("localhost:9090", False),  # the bound port only
        ("127.0.0.1", False),  # port 80
        ("", False),
        ("127.0.0.1:8080@evil.example", False),
    ],
)
def test_every_request_names_an_allowed_host(engine: Engine, host: str, allowed: bool) -> None:
    with client(engine, Settings()) as browser:
        for path in PATHS:
            response = browser.get(path, headers={"Host": host})
            assert (response.status_code == 200) == allowed, (path, response.status_code)
            if not allowed:
                assert response.status_code == 421 and (not host or host not in response.text)


@pytest.mark.parametrize(
    ("host", "allowed"),
    [
        ("dashboard.example.com", True),  # --allowed-host without a port: any port
        ("dashboard.example.com:8443", True),
        ("tunnel.example:9000", True),
        ("tunnel.example:9001", False),
        ("localhost:8080", True),  # the defaults stay
        ("evil.example:8080", False),
    ],
)
def test_allowed_host_adds_names(engine: Engine, host: str, allowed: bool) -> None:
    settings = Settings.from_options(allowed_hosts=["dashboard.example.com", "tunnel.example:9000"])
    with client(engine, settings) as browser:
        for path in PATHS:
            response = browser.get(path, headers={"Host": host})
            assert response.status_code == (200 if allowed else 421), path


def test_a_bad_allowed_host_option_is_refused() -> None:
    with pytest.raises(ValueError, match="--allowed-host"):
        Settings.from_options(allowed_hosts=["http://x/"])


# -- 3. headers and cookies that are not ASCII --------------------------------------------


@pytest.mark.parametrize(
    "headers",
    [
        {"Authorization": "Bearer tökén-ünïcode-0123456789".encode()},
        {"Authorization": "Basic ÿÿÿÿ".encode("latin-1")},
        {"Cookie": "raftflow_session=sëssion".encode()},
    ],
)
def test_a_header_or_cookie_that_is_not_ascii_is_a_401_not_a_500(
    engine: Engine, tmp_path: Path, headers: dict[str, bytes]
) -> None:
    basic = headers.get("Authorization", b"").startswith(b"Basic")
    settings = Settings.from_options(
        token=TOKEN, users_file=users_file(tmp_path) if basic else None
    )
    with client(engine, settings, raise_server_exceptions=False) as browser:
        response = browser.get("/executions", headers=headers)
    assert response.status_code == 401


# -- 4. sessions ----------------------------------------------------------------------------


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def sign_in(browser: TestClient, **form: str) -> str:
    response = browser.post("/login", data=form, follow_redirects=False)
    assert response.status_code == 303, response.text
    return str(response.cookies["raftflow_session"])


def test_each_sign_in_is_a_new_session_and_signing_out_revokes_it(engine: Engine) -> None:
    app = create_app(engine, Settings.from_options(token=TOKEN))
    with TestClient(app, base_url=BASE) as one, TestClient(app, base_url=BASE) as two:
        first, second = sign_in(one, token=TOKEN), sign_in(two, token=TOKEN)
        assert first != second and TOKEN not in first + second
        assert one.get("/workers").status_code == 200 and two.get("/workers").status_code == 200
        assert 'id="signout"' in one.get("/executions").text
        csrf = one.cookies["raftflow_csrf"]
        out = one.post("/logout", data={"csrf": csrf}, follow_redirects=False)
        assert out.status_code == 303 and out.headers["location"] == "/login"
        # The first session is gone on the server, even for a client that kept the cookie.
        with TestClient(app, base_url=BASE, cookies={"raftflow_session": first}) as replay:
            assert replay.get("/workers").status_code == 401
        assert two.get("/workers").status_code == 200  # the other one lives on


def test_a_sign_out_needs_the_csrf_token(engine: Engine) -> None:
    with client(engine, Settings.from_options(token=TOKEN)) as browser:
        sign_in(browser, token=TOKEN)
        assert browser.post("/logout", data={"csrf": "forged"}).status_code == 403
        assert browser.get("/workers").status_code == 200


def test_a_session_expires(engine: Engine) -> None:
    from raftflow.engine.ops.ui.sessions import Sessions

    clock = FakeClock()
    sessions = Sessions(ttl=3600, clock=clock)
    with client(engine, Settings.from_options(token=TOKEN), sessions=sessions) as browser:
        sign_in(browser, token=TOKEN)
        clock.now += 3599
        assert browser.get("/workers").status_code == 200
        clock.now += 2
        assert browser.get("/workers").status_code == 401
        assert len(sessions) == 0


def test_a_session_is_not_derived_from_the_token(engine: Engine) -> None:
    """Another dashboard with the same token (or this one after a restart) does not
    accept this one's session: it is random, not a function of the token."""
    settings = Settings.from_options(token=TOKEN)
    with client(engine, settings) as first, client(engine, settings) as restarted:
        session = sign_in(first, token=TOKEN)
        restarted.cookies.set("raftflow_session", session)
        assert restarted.get("/workers").status_code == 401


@pytest.mark.parametrize(
    "token", [TOKEN[:-1] + "X", TOKEN[:-1], TOKEN + "X", "", "tökén-ünïcode-0123456789"]
)
def test_a_wrong_token_is_refused(engine: Engine, token: str) -> None:
    with client(engine, Settings.from_options(token=TOKEN)) as browser:
        response = browser.post("/login", data={"token": token}, follow_redirects=False)
        assert response.status_code == 401 and "raftflow_session" not in response.cookies
        bearer = {"Authorization": f"Bearer {token}".encode()}
        assert browser.get("/workers", headers=bearer).status_code == 401


def test_cookies_are_secure_when_served_over_https(engine: Engine) -> None:
    for settings, secure in (
        (Settings.from_options(token=TOKEN), False),
        (Settings.from_options(token=TOKEN, secure_cookies=True), True),
    ):
        with client(engine, settings) as browser:
            response = browser.post("/login", data={"token": TOKEN}, follow_redirects=False)
            cookies = response.headers.get_list("set-cookie")
            assert len(cookies) == 2  # the session and the CSRF token
            for cookie in cookies:
                assert ("; secure" in cookie.lower()) == secure, cookie
                assert "httponly" in cookie.lower() and "samesite=strict" in cookie.lower()


# -- 4. salted password hashes --------------------------------------------------------------


def users_file(tmp_path: Path, **passwords: str) -> Path:
    from raftflow.engine.ops.ui.users import hash_password

    passwords = passwords or {"alice": "alice-S3cret", "bob": "bob-S3cret"}
    roles = {"alice": "admin", "bob": "viewer"}
    entries = [
        {"username": name, "password_hash": hash_password(secret, cost=2**10), "role": roles[name]}
        for name, secret in passwords.items()
    ]
    path = tmp_path / "users.json"
    path.write_text(json.dumps(entries))
    return path


def basic(name: str, password: str) -> dict[str, str]:
    return {"Authorization": "Basic " + base64.b64encode(f"{name}:{password}".encode()).decode()}


def test_a_password_hash_is_salted_scrypt_and_verifies(engine: Engine, tmp_path: Path) -> None:
    from raftflow.engine.ops.ui.users import PasswordHash, hash_password

    one, two = hash_password("same password"), hash_password("same password")
    assert one != two and one.startswith("scrypt$16384$8$1$")
    assert PasswordHash.parse(one).verify("same password")
    assert not PasswordHash.parse(one).verify("same passwore")
    settings = Settings.from_options(token=TOKEN, users_file=users_file(tmp_path))
    with client(engine, settings) as browser:
        assert browser.get("/workers", headers=basic("alice", "alice-S3cret")).status_code == 200
        assert browser.get("/workers", headers=basic("alice", "bob-S3cret")).status_code == 401
        assert browser.get("/workers", headers=basic("carol", "alice-S3cret")).status_code == 401
        # A viewer signs in on the page too, and may not act.
        sign_in(browser, username="bob", password="bob-S3cret")
        page = browser.get("/executions/target")
        assert page.status_code == 200 and "read-only" in page.text
        csrf = browser.cookies["raftflow_csrf"]
        refused = browser.post("/send", data={"id": "target", "message": "1", "csrf": csrf})
        assert refused.status_code == 403 and signals(engine) == []


@pytest.mark.parametrize(
    "entry",
    [
        {"username": "old", "password_sha256": "5e884898da28047151d0e56f8dc6292773603d0d"},
        {"username": "old", "password": "plain"},
    ],
)
def test_the_old_unsalted_format_is_refused_with_what_to_do(tmp_path: Path, entry: Any) -> None:
    path = tmp_path / "users.json"
    path.write_text(json.dumps([{**entry, "role": "admin"}]))
    with pytest.raises(ValueError, match="raftflow hash-password") as caught:
        Settings.from_options(users_file=path)
    assert "plain" not in str(caught.value).replace("plain passwords", "")
    assert "5e88" not in str(caught.value)


@pytest.mark.parametrize(
    "digest", ["scrypt$16384$8$1$AAAA", "scrypt$1000$8$1$c2FsdHNhbHQ$a2V5a2V5a2V5a2V5a2V5", "x"]
)
def test_a_malformed_password_hash_is_refused(tmp_path: Path, digest: str) -> None:
    path = tmp_path / "users.json"
    path.write_text(json.dumps([{"username": "u", "password_hash": digest, "role": "admin"}]))
    with pytest.raises(ValueError, match="password_hash") as caught:
        Settings.from_options(users_file=path)
    assert digest not in str(caught.value)


def test_the_operator_is_told_how_the_dashboard_is_exposed() -> None:
    from raftflow.engine.ops.ui.server import startup_warnings

    assert startup_warnings(Settings()) == []
    plain = Settings.from_options(bind="0.0.0.0:8080", token=TOKEN)
    assert [w.split(":")[0] for w in startup_warnings(plain)] == [
        "sign-ins and session cookies cross the network in clear text",
        "listening on 0.0.0.0, it answers only requests for localhost",
    ]
    proxied = Settings.from_options(
        bind="0.0.0.0:8080", token=TOKEN, secure_cookies=True, allowed_hosts=["ui.example"]
    )
    assert startup_warnings(proxied) == []
