"""The result as a plain-text table (the JSON holds everything; this is the summary)."""

from __future__ import annotations

from typing import Any

DASH = "-"


def _num(value: Any, digits: int = 0) -> str:
    if value is None:
        return DASH
    if isinstance(value, (int, float)):
        return f"{value:,.{digits}f}"
    return str(value)


def _pair(summary: dict[str, Any] | None, digits: int = 1) -> str:
    if not summary or summary.get("p50_ms") is None:
        return DASH
    return f"{summary['p50_ms']:.{digits}f} / {summary['p99_ms']:.{digits}f}"


def _cores(cpu: dict[str, float] | None) -> str:
    if not cpu:
        return DASH
    return f"{cpu.get('rqlite', 0):.2f} / {cpu.get('workers', 0):.2f} / {cpu.get('bench', 0):.2f}"


def _rss(rss: dict[str, Any] | None) -> str:
    if not rss or not rss.get("processes"):
        return DASH
    return f"{rss['start_mb']:.0f} / {rss['peak_mb']:.0f} / {rss['end_mb']:.0f}"


def _table(headers: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in [headers, *rows]) for i in range(len(headers))]
    lines = []
    for n, row in enumerate([headers, *rows]):
        cells = [row[0].ljust(widths[0])] + [c.rjust(w) for c, w in zip(row[1:], widths[1:])]
        lines.append("  ".join(cells).rstrip())
        if n == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _nodes(meta: dict[str, Any]) -> str:
    if meta["settings"]["mode"] == "shards":
        return "single-node clusters"
    return f"{meta.get('nodes', 3)} nodes"


def header(results: dict[str, Any]) -> str:
    meta = results["meta"]
    m = meta["machine"]
    s = meta["settings"]
    code = meta["code"]
    dirty = f" + uncommitted {', '.join(code['uncommitted'])}" if code["uncommitted"] else ""
    before, after = meta["load_average"]
    lines = [
        f"raftflow benchmark, {meta['started_at']} (took {meta['seconds']:.0f}s), "
        f"git {code['commit'] or '?'}{dirty}",
        f"machine: {m['cores']} cores ({m['cpu_model']}), {m['memory_gib']} GiB, "
        f"Python {m['python']}; rqlite {meta['rqlite']}, {_nodes(meta)} on 127.0.0.1; "
        f"load average {before} before, {after} after",
    ]
    if s["mode"] == "default":
        kind = "sync" if s["sync"] else "async"
        lines.append(
            f"workload: {s['workers']} worker processes x concurrency {s['concurrency']}, "
            f"{s['executions']} executions x {s['steps']} steps = "
            f"{s['executions'] * s['steps']:,} steps ({kind} steps sleeping {s['step_sleep']}s)"
            + (" [smoke]" if s["smoke"] else "")
        )
    return "\n".join(lines)


def render_default(results: dict[str, Any]) -> str:
    raw = results.get("raw", {})
    r1 = raw.get("single_client", {})
    rc = raw.get("concurrent", {})
    rf = results.get("raftflow", {})
    nv = results.get("naive", {})
    ratios = results.get("ratios", {})
    conc = f"raw {rc.get('processes', '?')}x{rc.get('clients_per_process', '?')}"
    headers = ["", "raw 1 client", conc, "raftflow", "naive spec"]

    def row(label: str, *cells: str) -> list[str]:
        return [label, *cells]

    def per_step(data: dict[str, Any], key: str) -> str:
        return _num(data.get(key), 2) if data else DASH

    rows = [
        row(
            "writes/s | steps/s (steady)",
            _num(r1.get("writes_per_s")),
            _num(rc.get("writes_per_s")),
            _num(rf.get("steady_steps_per_s")),
            _num(nv.get("steady_steps_per_s")),
        ),
        row(
            "steps/s (first start to last end)",
            DASH,
            DASH,
            _num(rf.get("steps_per_s")),
            _num(nv.get("steps_per_s")),
        ),
        row(
            "executions/s",
            DASH,
            DASH,
            _num(rf.get("executions_per_s"), 1),
            _num(nv.get("executions_per_s"), 1),
        ),
        row(
            "ratio to raw writes/s at WxC",
            DASH,
            "1.00",
            _num(ratios.get("raftflow_steps_per_raw_write"), 2),
            _num(ratios.get("naive_steps_per_raw_write"), 2),
        ),
        row(
            "request p50 / p99 ms",
            _pair(r1.get("latency"), 2),
            _pair(rc.get("latency"), 2),
            DASH,
            DASH,
        ),
        row(
            "step-to-step p50 / p99 ms",
            DASH,
            DASH,
            _pair(rf.get("step_to_step")),
            _pair(nv.get("step_to_step")),
        ),
        row(
            "  within a turn (no claim)",
            DASH,
            DASH,
            _pair(rf.get("step_to_step_in_turn")),
            DASH,
        ),
        row(
            "  first step of a turn (claim)",
            DASH,
            DASH,
            _pair(rf.get("step_to_step_new_turn")),
            DASH,
        ),
        row(
            "Raft entries per step (counted)",
            "1.00" if r1 else DASH,
            "1.00" if rc else DASH,
            per_step(rf, "raft_per_step"),
            per_step(nv, "raft_per_step"),
        ),
        row(
            "Raft entries per step (/status)",
            _num(r1["raft_entries"] / r1["writes"], 2) if r1.get("writes") else DASH,
            _num(rc["raft_entries"] / rc["writes"], 2) if rc.get("writes") else DASH,
            per_step(rf, "raft_per_step_applied"),
            per_step(nv, "raft_per_step_applied"),
        ),
        row(
            "HTTP round trips per step",
            "1.00" if r1 else DASH,
            "1.00" if rc else DASH,
            per_step(rf, "round_trips_per_step"),
            per_step(nv, "round_trips_per_step"),
        ),
        row(
            "commits per commit request",
            DASH,
            DASH,
            _num(rf.get("commits_per_request"), 2),
            DASH,
        ),
        row(
            "commit request p50 / p99 ms",
            DASH,
            DASH,
            _pair(rf.get("commit_request"), 2),
            DASH,
        ),
        row(
            "claim request p50 / p99 ms",
            DASH,
            DASH,
            _pair(rf.get("claim_request"), 2),
            _pair(nv.get("claim_request"), 2),
        ),
        row(
            "CPU cores: rqlite / clients / bench",
            _cores(r1.get("cpu_cores")),
            _cores(rc.get("cpu_cores")),
            _cores(rf.get("cpu_cores")),
            _cores(nv.get("cpu_cores")),
        ),
        row(
            "client CPU ms per 1k steps",
            DASH,
            DASH,
            _num(rf.get("worker_cpu_seconds_per_1k_steps", 0) * 1000)
            if rf.get("worker_cpu_seconds_per_1k_steps") is not None
            else DASH,
            _num(nv.get("worker_cpu_seconds_per_1k_steps", 0) * 1000)
            if nv.get("worker_cpu_seconds_per_1k_steps") is not None
            else DASH,
        ),
        row(
            "worker RSS MB start / peak / end",
            DASH,
            DASH,
            _rss(rf.get("worker_rss")),
            _rss(nv.get("worker_rss")),
        ),
    ]
    lines = [header(results), "", _table(headers, rows)]
    e2e = rf.get("e2e")
    if e2e:
        lines.append("")
        lines.append(
            f"end-to-end, 1-step workflow (start() -> result(), {e2e['samples']} sequential): "
            f"p50 {e2e['client']['p50_ms']:.1f} ms, p99 {e2e['client']['p99_ms']:.1f} ms; "
            f"stored created -> completed p50 "
            f"{e2e['stored_created_to_completed']['p50_ms']:.1f} ms, p99 "
            f"{e2e['stored_created_to_completed']['p99_ms']:.1f} ms"
        )
    if rf:
        lines.append(
            f"raftflow Raft entries: {rf['raft_entries_applied']:,} applied (leader /status) = "
            f"{rf['raft_entries_workers']:,} from workers + {rf['raft_entries_client']:,} "
            f"start() + {rf['raft_entries_unattributed']:,} other; elections {rf['elections']}; "
            f"commit requests in flight per worker (mean) "
            f"{', '.join(f'{b:.2f}' for b in rf['commit_requests_in_flight'])}"
        )
        lines.append(
            "raftflow requests per step: "
            + ", ".join(f"{k} {v:.3f}" for k, v in rf["requests_per_step"].items())
        )
    if nv:
        lines.append(
            f"naive Raft entries: {nv['raft_entries_applied']:,} applied = "
            f"{nv['raft_entries_workers']:,} from workers + {nv['raft_entries_client']:,} "
            f"first publishes + {nv['raft_entries_unattributed']:,} other; "
            f"elections {nv['elections']}"
        )
    if ratios.get("raftflow_over_naive"):
        lines.append(f"raftflow / naive steps/s: {ratios['raftflow_over_naive']:.1f}x")
    tx = results.get("transactions", {})
    if tx:
        lines.append(_transactions_line(tx, rf, ratios))
    return "\n".join(lines)


def _transactions_line(tx: dict[str, Any], rf: dict[str, Any], ratios: dict[str, Any]) -> str:
    """The transactions phase next to the plain-step figures of the same run."""

    def both(key: str, digits: int = 2) -> str:
        return f"{_num(tx.get(key), digits)} (plain {_num(rf.get(key), digits)})"

    cpu = {
        name: _num(data["worker_cpu_seconds_per_1k_steps"] * 1000)
        if data.get("worker_cpu_seconds_per_1k_steps") is not None
        else DASH
        for name, data in (("tx", tx), ("plain", rf))
    }
    ledger = tx.get("ledger", {})
    return (
        f"transaction steps: {both('steady_steps_per_s', 0)} steps/s, "
        f"{_num(ratios.get('transaction_steps_per_plain_step'), 2)}x; Raft entries per step "
        f"{both('raft_per_step_applied')}; round trips per step {both('round_trips_per_step')}; "
        f"commits per commit request {both('commits_per_request')}; worker CPU ms per 1k "
        f"steps {cpu['tx']} (plain {cpu['plain']}); ledger {ledger.get('rows')} rows, "
        f"balance left {ledger.get('balance_left')}, exactly once {ledger.get('exactly_once')}"
    )


def render_scale(results: dict[str, Any]) -> str:
    lines = [header(results), ""]
    claims = results.get("claim_latency", {})
    if claims:
        headers = ["claim latency p50 / p99 ms", *[f"{n:,} queued" for n in claims["sizes"]]]
        rows = [
            [label, *[_pair(case.get(label), 2) for case in claims["cases"]]]
            for label in claims["labels"]
        ]
        lines += [_table(headers, rows), ""]
    rss = results.get("rss", {})
    if rss:
        headers = ["steps done", "worker RSS MB (sum)", "steps/s in segment"]
        rows = [
            [f"{p['steps']:,}", _num(p["rss_mb"], 1), _num(p.get("steps_per_s"))]
            for p in rss["points"]
        ]
        lines += [
            f"RSS over {rss['steps']:,} steps ({rss['workers']} workers x concurrency "
            f"{rss['concurrency']}, {rss['seconds']:.0f}s, {rss['steady_steps_per_s']:,.0f} "
            f"steps/s): growth over the second half {rss['growth_second_half_mb']:+.1f} MB",
            _table(headers, rows),
        ]
    return "\n".join(lines)


def render_cost(results: dict[str, Any]) -> str:
    headers = [
        "request (one client, sequential)",
        "stmts",
        "wall ms",
        "leader CPU ms",
        "follower CPU ms",
        "cluster CPU ms",
        "per commit",
        "commits/s",
    ]
    rows = [
        [
            r["request"],
            str(r["statements"]),
            _num(r["wall_ms"], 2),
            _num(r["leader_cpu_ms"], 2),
            _num(r["follower_cpu_ms"], 2),
            _num(r["cluster_cpu_ms"], 2),
            _num(r.get("cluster_cpu_ms_per_commit"), 2),
            _num(r.get("commits_per_s_one_client")),
        ]
        for r in results["requests"]
    ]
    lines = [header(results), "", _table(headers, rows)]
    alone = results.get("sqlite_alone")
    if alone:
        commit = alone["commit"]
        claim = alone["claim_statements"]
        lines += [
            "",
            f"SQLite alone ({claim['sqlite']}, in memory): commit statement + outcome read "
            f"{commit['commit_ms_cache_128']} ms with a statement cache, "
            f"{commit['commit_ms_cache_0']} ms prepared each time (as rqlite does)",
        ]
        names = [k for k in claim["rows"][0] if k != "pending"]
        lines.append(
            _table(
                [
                    "claim request statement, ms",
                    *[f"{r['pending']:,} pending" for r in claim["rows"]],
                ],
                [[name, *[_num(r[name], 3) for r in claim["rows"]]] for name in names],
            )
        )
    return "\n".join(lines)


def render(results: dict[str, Any]) -> str:
    mode = results["meta"]["settings"]["mode"]
    if mode == "cost":
        return render_cost(results)
    if mode == "scale":
        return render_scale(results)
    if mode == "long":
        from bench.long import render as render_long

        return render_long(results)
    if mode == "shards":
        from bench.shard_report import render as render_shards

        return render_shards(results)
    text = render_default(results)
    if "latency" in results:
        from bench.latency_goals import render as render_latency

        text += "\n" + render_latency(results["latency"])
    if "timers" in results:
        from bench.timers import render as render_timers

        text += "\n" + render_timers(results["timers"])
    return text
