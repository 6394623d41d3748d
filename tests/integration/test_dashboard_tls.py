"""The real dashboard process (``raftflow ui`` on an embedded SQLite file): HTTPS with
``--tls-cert/--tls-key`` (a throwaway CA made by trustme) and Secure cookies, the token
read from ``--token-file``, the Host allow-list, a header that is not ASCII answered 401
with nothing logged, ``--token``'s warning and ``raftflow hash-password``."""

from __future__ import annotations

import os
import ssl
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import trustme
from raftflow.engine.ops.ui.users import PasswordHash
from raftflow.transports.rqlite.local.ports import pick_free_ports

from tests.support import wait_until

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "tls-dashboard-token-0123456789"


class Served:
    def __init__(self, process: subprocess.Popen[bytes], log: Path, base: str, ca: Path) -> None:
        self.process, self.log, self.base = process, log, base
        self.context = ssl.create_default_context(cafile=ca)

    def output(self) -> str:
        return self.log.read_text(errors="replace")


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    folder = tmp_path_factory.mktemp("dashboard-tls")
    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1", "localhost")
    cert_path, key_path, ca_path = folder / "ui.pem", folder / "ui.key", folder / "ca.pem"
    cert.cert_chain_pems[0].write_to_path(str(cert_path))
    for blob in cert.cert_chain_pems[1:]:
        blob.write_to_path(str(cert_path), append=True)
    cert.private_key_pem.write_to_path(str(key_path))
    ca.cert_pem.write_to_path(str(ca_path))
    (folder / "token").write_text(TOKEN + "\n")
    (port,) = pick_free_ports(1)
    log = folder / "ui.log"
    argv = [
        *(sys.executable, "-m", "raftflow", "ui", "--url", f"sqlite:///{folder / 'ui.db'}"),
        *("--bind", f"127.0.0.1:{port}", "--token-file", str(folder / "token")),
        *("--tls-cert", str(cert_path), "--tls-key", str(key_path)),
    ]
    with open(log, "wb") as sink:
        process = subprocess.Popen(argv, cwd=ROOT, stdout=sink, stderr=subprocess.STDOUT)
    result = Served(process, log, f"https://127.0.0.1:{port}", ca_path)

    def up() -> bool:
        assert process.poll() is None, f"the dashboard exited:\n{result.output()}"
        try:
            return httpx.get(
                result.base + "/healthz",
                verify=ssl.create_default_context(cafile=ca_path),
                timeout=1,
            ).is_success
        except httpx.HTTPError:
            return False

    try:
        wait_until(up, timeout=60, interval=0.1)
        yield result
    finally:
        process.terminate()
        try:
            process.wait(15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def test_over_tls_the_token_from_a_file_signs_in_with_secure_cookies(served: Served) -> None:
    with httpx.Client(base_url=served.base, verify=served.context, timeout=10) as client:
        assert client.get("/executions").status_code == 401
        signed = client.post("/login", data={"token": TOKEN})
        assert signed.status_code == 303
        cookies = signed.headers.get_list("set-cookie")
        session = [c for c in cookies if c.startswith("raftflow_session=")]
        assert session and all("; secure" in c.lower() for c in cookies), cookies
        assert TOKEN not in session[0]
        assert client.get("/workers").status_code == 200
        bearer = {"Authorization": f"Bearer {TOKEN}"}
        assert httpx.get(served.base + "/workers", headers=bearer, verify=served.context).is_success
    with pytest.raises(httpx.HTTPError):  # plain HTTP is not served
        httpx.get(served.base.replace("https", "http") + "/healthz", timeout=5)
    assert TOKEN not in served.output()


def test_the_real_server_refuses_other_host_names_and_bad_headers_quietly(served: Served) -> None:
    with httpx.Client(base_url=served.base, verify=served.context, timeout=10) as client:
        port = served.base.rsplit(":", 1)[1]
        for host in (f"evil.example:{port}", "evil.example"):
            assert client.get("/healthz", headers={"Host": host}).status_code == 421
        assert client.get("/healthz", headers={"Host": f"localhost:{port}"}).status_code == 200
        for headers in (
            {"Authorization": "Bearer tökén-0123456789abcdef".encode()},
            {"Cookie": "raftflow_session=sëssion".encode()},
        ):
            assert client.get("/workers", headers=headers).status_code == 401
    output = served.output()
    assert "Traceback" not in output and "Exception" not in output, output


def raftflow(*args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "raftflow", *args],
        cwd=ROOT,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        env={k: v for k, v in os.environ.items() if not k.startswith("RAFTFLOW_UI_TOKEN")},
    )


def test_a_token_on_the_command_line_is_warned_about(tmp_path: Path) -> None:
    # A bad --bind stops it right after the options are read.
    url = f"sqlite:///{tmp_path / 'x.db'}"
    on_line = raftflow("ui", "--url", url, "--token", TOKEN, "--bind", "nowhere")
    assert on_line.returncode == 2 and "--token on the command line shows in ps" in on_line.stderr
    assert TOKEN not in on_line.stdout + on_line.stderr
    both = raftflow("ui", "--url", url, "--token", TOKEN, "--token-file", str(tmp_path / "t"))
    assert both.returncode == 2 and "one way" in both.stderr


def test_hash_password_prints_a_salted_scrypt_hash() -> None:
    made = raftflow("hash-password", stdin="s3cret-Passw0rd\n")
    assert made.returncode == 0, made.stderr
    digest = made.stdout.strip()
    assert PasswordHash.parse(digest).verify("s3cret-Passw0rd")
    assert "s3cret" not in digest
    assert raftflow("hash-password", stdin="").returncode == 2
