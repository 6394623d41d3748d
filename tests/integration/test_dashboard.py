"""The dashboard in a real headless Chromium (Debian's chromium + chromium-driver, driven by
Selenium), against the shared cluster with a worker process: the pages, a cancel and a
signal done by clicking, the queue with an execution waiting on a concurrency limit, the
cron schedules with one that the worker fired, and the authentication and CSRF checks over
plain HTTP.

Screenshots go to the test's temporary folder; with ``RAFTFLOW_SCREENSHOTS=docs/img``
(``make screenshots``) also there, for the README. Without Chromium the browser test is
skipped, with the reason -- under CI (``CI=1``) it fails instead: ``make test`` installs it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import urllib.parse
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from raftflow.engine.ops.ui.server import execution_url
from raftflow.engine.runtime.schedules import SQL as SCHEDULES
from raftflow.engine.workflow.schedule import Schedule
from raftflow.stores.records import Status
from raftflow.transports.db.flow import Flow, Request
from raftflow.transports.rqlite.local import LocalCluster
from raftflow.transports.rqlite.local.ports import pick_free_ports
from raftflow.transports.rqlite.local.pytest_plugin import missing

from tests.apps import ops
from tests.integration.workers import WorkerProcess, rotated_url
from tests.support import clear_tables, wait_until

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "correct-horse-battery-staple"


class Dashboard:
    def __init__(self, url: str, log: Path, *extra: str) -> None:
        (self.port,) = pick_free_ports(1)
        self.base = f"http://127.0.0.1:{self.port}"
        self._log = open(log, "wb")  # noqa: SIM115 - closed in stop()
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "raftflow",
                "ui",
                "--url",
                url,
                "--bind",
                f"127.0.0.1:{self.port}",
                *extra,
            ],
            cwd=ROOT,
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        wait_until(self._up, timeout=60, interval=0.1)

    def _up(self) -> bool:
        assert self.process.poll() is None, "the dashboard exited"
        try:
            return httpx.get(self.base + "/healthz", timeout=1).status_code == 200
        except httpx.HTTPError:
            return False

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(15)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self._log.close()


@pytest.fixture(scope="module")
def url(rqlite_cluster: LocalCluster) -> str:
    clear_tables(rqlite_cluster.url)
    return rotated_url(rqlite_cluster.urls, 2)


def left_parked(schedule: Schedule, at: float) -> Flow[None]:
    """A schedule's message as a worker stopped since ``at`` left it: parked for ``at``."""
    params = {
        "group_id": schedule.group_id,
        "event": schedule.event(at),
        "now": at,
        "at": at,
        "lane": schedule.lane,
    }
    response = yield Request((SCHEDULES("ensure", params),))
    response.raise_for_errors()


@pytest.fixture(scope="module")
def running(url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """A worker, the app's executions (finished, failed, waiting), an open dashboard."""
    logs = tmp_path_factory.mktemp("dashboard")
    ops.engine.connect(url)
    # The nightly schedule, last parked for the latest 03:00 (its workers were down since):
    # the worker below finds it due and catches that time up -- a real fire.
    nightly = ops.engine.schedules["nightly"]
    last_time = nightly.next_after(time.time() - 86400)
    ops.engine.store.run(left_parked(nightly, last_time))
    worker = WorkerProcess(
        "tests.apps.ops:engine", url, logs / "worker.log", concurrency=4, worker_id="ui-worker"
    )
    dashboard: Dashboard | None = None
    try:
        order = ops.Order
        done = [ops.engine.start(ops.checkout, order(id=f"o-{i}", amount=10 + i)) for i in range(3)]
        failed = ops.engine.start(ops.refund, order(id="o-9", amount=9), execution_id="refund-9")
        batch = ops.engine.start(ops.batch, [order(id="b-1", amount=1), order(id="b-2", amount=2)])
        to_cancel = ops.engine.start(
            ops.approval, order(id="o-20", amount=20), execution_id="approval-cancel-me"
        )
        to_signal = ops.engine.start(
            ops.approval, order(id="o-21", amount=21), execution_id="approval-signal-me"
        )
        # Concurrency 1: the first settlement holds the slot (waiting for a signal), the
        # second waits for it, its queue group gated.
        holding = ops.engine.start(ops.settle, order(id="s-1", amount=1), execution_id="settle-1")
        gated = ops.engine.start(ops.settle, order(id="s-2", amount=2), execution_id="settle-2")
        fired_id = nightly.execution_id(last_time)
        fired = wait_until(
            lambda: ops.engine.store.get(fired_id) and ops.engine.get(fired_id), timeout=60
        )
        for handle in (*done, batch):
            handle.result(timeout=60)
        wait_until(lambda: failed.status().is_final, timeout=60)
        for handle in (to_cancel, to_signal, holding):
            wait_until(lambda h=handle: h.info().steps_done == 1, timeout=60)
        assert fired.result(timeout=60) == f"rsv-nightly-{nightly.when(last_time):%Y%m%d}"
        dashboard = Dashboard(url, logs / "ui.log")
        yield {
            "dashboard": dashboard,
            "url": url,
            "logs": logs,
            "cancel": to_cancel,
            "signal": to_signal,
            "failed": failed,
            "batch": batch,
            "holding": holding,
            "gated": gated,
            "fired": fired,
        }
    finally:
        if dashboard is not None:
            dashboard.stop()
        worker.stop()
        ops.engine.remove_schedule("nightly")  # the shared cluster's next users
        ops.engine.close()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    driver_path = shutil.which("chromedriver")
    if not chromium or not driver_path:
        reason = "Debian's chromium and chromium-driver are not installed (make browser)"
        missing(reason)
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for argument in (
        "--headless=new",
        "--no-sandbox",
        "--disable-dev-shm-usage",
        "--disable-gpu",
        "--window-size=1360,900",
        "--hide-scrollbars",
    ):
        options.add_argument(argument)
    driver = webdriver.Chrome(service=Service(executable_path=driver_path), options=options)
    driver.set_page_load_timeout(30)
    try:
        yield driver
    finally:
        driver.quit()


def shooter(folder: Path) -> Callable[[Any, str], Path]:
    extra = os.environ.get("RAFTFLOW_SCREENSHOTS")

    def shoot(driver: Any, name: str) -> Path:
        path = folder / f"{name}.png"
        driver.save_screenshot(str(path))
        if extra:
            target = ROOT / extra if not os.path.isabs(extra) else Path(extra)
            target.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, target / path.name)
        return path

    return shoot


def test_the_pages_and_a_cancel_and_a_signal_by_clicking(
    running: dict[str, Any], browser: Any, tmp_path: Path
) -> None:
    from selenium.webdriver.common.by import By

    base = running["dashboard"].base
    shoot = shooter(tmp_path)
    find = browser.find_element

    def text_of(selector: str) -> str:
        return str(find(By.CSS_SELECTOR, selector).text)

    def follow(element: Any, path: str) -> None:
        """Click, and wait for the page it leads to: a click returns before the navigation
        ends, and reading (or refreshing) at once would act on the page left behind --
        under load a refresh right after a form's click reloads the form, its POST lost."""
        element.click()

        def arrived() -> bool:
            here = urllib.parse.urlsplit(browser.current_url)
            target = here.path + ("?" + here.query if here.query else "")
            loaded = browser.execute_script("return document.readyState") == "complete"
            return target.startswith(path) and loaded

        assert wait_until(arrived, timeout=30, interval=0.05), (browser.current_url, path)

    # Executions: every one listed, with live counts.
    browser.get(base + "/executions")
    table = text_of("#executions")
    for needle in ("approval-cancel-me", "refund-9", "checkout", "batch"):
        assert needle in table
    # Six and the nightly schedule's run.
    assert wait_until(lambda: text_of('[data-status="succeeded"]') == "7", timeout=10)
    assert text_of('[data-status="failed"]') == "1"
    shoot(browser, "executions")

    # The failed one: the timeline, the retry's history, the error with its traceback.
    follow(find(By.LINK_TEXT, "refund-9"), execution_url("refund-9"))
    page = text_of("main")
    assert "call_bank" in page and "attempt 1 failed" in page and "ConnectionError" in page
    assert "Cancel…" not in page  # finished: no actions
    shoot(browser, "execution-failed")

    # The batch: its children, linked.
    browser.get(base + execution_url(running["batch"].id))
    assert f"{running['batch'].id}/0" in text_of("main")

    # Cancel by clicking: the confirmation page, then the status changes.
    target = running["cancel"]
    browser.get(base + execution_url(target.id))
    assert "parked" in text_of("#lease")
    shoot(browser, "execution")
    follow(find(By.ID, "cancel"), "/cancel?")
    assert "Cancel" in text_of("h1") and target.id in text_of("h1")
    shoot(browser, "confirm-cancel")
    follow(find(By.ID, "confirm"), execution_url(target.id))

    def status_is(expected: str, execution_id: str) -> bool:
        browser.get(base + execution_url(execution_id))
        return text_of("#status") == expected

    wait_until(lambda: status_is("cancelled", target.id), timeout=30, interval=0.3)
    assert target.status().value == "cancelled"
    assert "Cancel…" not in text_of("main")

    # Send a signal by clicking: the waiting approval continues and succeeds.
    other = running["signal"]
    browser.get(base + execution_url(other.id))
    follow(find(By.ID, "send"), "/send?")
    find(By.ID, "topic").send_keys("review")
    message = find(By.ID, "message")
    message.clear()
    message.send_keys('{"ok": true}')
    follow(find(By.ID, "confirm"), execution_url(other.id))
    wait_until(lambda: status_is("succeeded", other.id), timeout=30, interval=0.3)
    assert other.result(timeout=10) == "pay-o-21-21.00"
    assert "review" in text_of("main")  # the signal, listed

    # The queue and the workers.
    browser.get(base + "/queue")
    assert [
        row.text.split()[0] for row in browser.find_elements(By.CSS_SELECTOR, "#depth tbody tr")
    ] == ["4", "3", "2", "1", "0"]
    # One settlement holds the limit's only slot; the other waits for it, counted apart
    # from the parked ones (the holder's signal wait, and the schedule's message).
    assert text_of("#waiting") == "1" and text_of("#schedules") == "1"
    assert int(text_of("#parked")) >= 1
    (limit,) = browser.find_elements(By.CSS_SELECTOR, "#limits tbody tr")
    assert limit.text.split()[:7] == ["settle", "settle", "1", "/", "1", "1", "settle-2"]
    shoot(browser, "queue")
    browser.get(base + "/workers")
    assert "ui-worker" in text_of("#workers") and "running" in text_of("#workers")
    shoot(browser, "workers")

    # The schedules: the nightly one, parked until tomorrow's 03:00, and the run it started.
    follow(find(By.LINK_TEXT, "Schedules"), "/schedules")
    row = text_of("#schedules tbody tr")
    assert "nightly" in row and "0 3 * * *" in row and "UTC" in row and "parked" in row
    assert row.count("03:00:00 UTC") == 3  # the next three times
    shoot(browser, "schedules")
    follow(find(By.LINK_TEXT, running["fired"].id), execution_url(running["fired"].id))
    assert text_of("#status") == "succeeded" and "reserve" in text_of("main")
    assert all(
        (tmp_path / f"{n}.png").stat().st_size > 10_000
        for n in ("executions", "execution", "queue", "workers", "schedules")
    )


def test_the_queue_and_schedules_pages_and_the_queue_command(running: dict[str, Any]) -> None:
    """Without a browser too: the pages' content over HTTP, and ``raftflow queue --json``."""
    base = running["dashboard"].base
    with httpx.Client(base_url=base, timeout=10) as client:
        queue = client.get("/queue").text
        assert 'id="waiting">1<' in queue and 'href="/executions/settle-2"' in queue
        assert (
            'id="queues"' in queue
            and f'<td>settle</td><td class="mono">{ops.engine.version}<' in queue
        )
        schedules = client.get("/schedules").text
        assert running["fired"].id in schedules and "0 3 * * *" in schedules
        assert len(client.get("/schedules?next=5").text.split("03:00:00 UTC")) == 6
        # Bad numbers in a query: a clear 400, not a server error.
        for path in ("/schedules?next=abc", "/executions?limit=x", "/workers?within=nan"):
            response = client.get(path)
            assert response.status_code == 400 and "must be a number" in response.text, path
    out = subprocess.run(
        [sys.executable, "-m", "raftflow", "queue", "--json", "--url", running["url"]],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    data = json.loads(out)
    assert data["waiting_on_limits"] == 1 and data["schedules"] == 1
    (limit,) = data["limits"]
    assert limit["limit_key"] == "settle" and limit["workflow"] == "settle"
    assert (limit["limit"], limit["holding"], limit["waiting"]) == (1, 1, 1)
    assert limit["next"] == running["gated"].id and limit["next_waited"] >= 0
    # Per queue and workflow: the two settlements (holding, gated), served by the live worker.
    (settle,) = [q for q in data["queues"] if q["workflow"] == "settle"]
    assert (settle["queue"], settle["version"]) == ("default", ops.engine.version)
    assert settle["groups"] == 2 and settle["workers"] >= 1
    human = subprocess.run(
        [sys.executable, "-m", "raftflow", "queue", "--url", running["url"]],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    assert "waiting on a concurrency limit: 1" in human and "settle-2" in human


def test_tokens_read_only_and_csrf_are_enforced(running: dict[str, Any]) -> None:
    base = running["dashboard"].base
    target = running["failed"].id
    with httpx.Client(base_url=base, timeout=10) as open_client:
        page = open_client.get(f"/cancel?id={target}")
        assert page.status_code == 200 and open_client.cookies.get("raftflow_csrf")
        assert page.headers["x-frame-options"] == "DENY"
        token = open_client.cookies["raftflow_csrf"]
        assert open_client.post("/cancel", data={"id": target, "csrf": "forged"}).status_code == 403
        foreign = open_client.post(
            "/cancel", data={"id": target, "csrf": token}, headers={"Origin": "http://evil.example"}
        )
        assert foreign.status_code == 403
        assert open_client.get("/executions/no-such-id").status_code == 404

    guarded = Dashboard(
        running["url"], running["logs"] / "ui-token.log", "--token", TOKEN, "--read-only"
    )
    try:
        with httpx.Client(base_url=guarded.base, timeout=10) as client:
            assert client.get("/executions").status_code == 401
            assert client.get("/executions", headers={"Accept": "text/html"}).status_code == 303
            bearer = {"Authorization": f"Bearer {TOKEN}"}
            page = client.get(execution_url(running["cancel"].id), headers=bearer)
            assert page.status_code == 200 and "read-only" in page.text
            signed = client.post("/login", data={"token": TOKEN})
            assert signed.status_code == 303 and TOKEN not in str(client.cookies)
            assert client.get("/workers").status_code == 200  # the session cookie
            csrf = client.cookies["raftflow_csrf"]
            for action in ("/cancel", "/resume", "/fork"):
                refused = client.post(action, data={"id": target, "csrf": csrf, "from_step": "0"})
                assert refused.status_code == 403 and "read-only" in refused.text
            assert 'id="resume"' not in client.get(execution_url(target)).text
    finally:
        guarded.stop()
    assert TOKEN not in (running["logs"] / "ui-token.log").read_text()


def test_resume_and_fork_from_a_failed_executions_page(running: dict[str, Any]) -> None:
    """A failed execution's page offers resume and fork, each behind a confirmation page
    and the CSRF checks of cancel. The resumed step keeps its failed attempts and gets a new
    round of retries; a fork from past the recorded calls is refused with the reason."""
    failed = ops.engine.start(ops.refund, ops.Order(id="o-30", amount=30), execution_id="refund-30")
    wait_until(lambda: failed.status() is Status.FAILED, timeout=60)
    with httpx.Client(base_url=running["dashboard"].base, timeout=10) as client:
        page = client.get(execution_url(failed.id)).text
        assert 'id="resume"' in page and 'id="fork"' in page and "not yet" not in page
        confirm = client.get(f"/resume?id={failed.id}")
        assert confirm.status_code == 200 and "Resume" in confirm.text
        csrf = client.cookies["raftflow_csrf"]
        assert f'name="csrf" value="{csrf}"' in confirm.text
        resume = {"id": failed.id, "csrf": csrf}
        assert client.post("/resume", data={**resume, "csrf": "forged"}).status_code == 403
        evil = {"Origin": "http://evil.example"}
        assert client.post("/resume", data=resume, headers=evil).status_code == 403
        assert failed.status() is Status.FAILED  # refused: nothing done
        resumed = client.post("/resume", data=resume)
        assert resumed.status_code == 303
        assert resumed.headers["location"] == execution_url(failed.id)
        # The bank still refuses: two more attempts (a new round of Retry(max_attempts=2)).
        wait_until(lambda: failed.status() is Status.FAILED, timeout=60)
        bank = failed.steps()[1]
        assert (bank.name, bank.status, bank.attempts) == ("call_bank", "failed", 4)
        assert [a.attempt for a in bank.history] == [1, 2, 3]  # before: history erased

        form = client.get(f"/fork?id={failed.id}")
        assert form.status_code == 200 and 'name="from_step"' in form.text
        assert "recorded 2 call(s)" in form.text
        fork = {"id": failed.id, "csrf": csrf, "from_step": "1", "new_id": "refund-30-fork"}
        assert client.post("/fork", data={**fork, "csrf": "forged"}).status_code == 403
        assert client.post("/fork", data=fork, headers=evil).status_code == 403
        too_far = client.post("/fork", data={**fork, "from_step": "9"})
        assert too_far.status_code == 400 and "from_step must be 0..2, not 9" in too_far.text
        not_a_number = client.post("/fork", data={**fork, "from_step": "two"})
        assert not_a_number.status_code == 400 and "whole number" in not_a_number.text
        assert ops.engine.store.get("refund-30-fork") is None
        forked = client.post("/fork", data=fork)
        assert forked.status_code == 303
        assert forked.headers["location"] == execution_url("refund-30-fork")
    copy = ops.engine.get("refund-30-fork")
    wait_until(lambda: copy.status() is Status.FAILED, timeout=60)
    reserve, bank = copy.steps()
    assert reserve.started_at == failed.steps()[0].started_at  # its record, not run again
    assert (bank.attempts, len(bank.history)) == (2, 1)  # run afresh
