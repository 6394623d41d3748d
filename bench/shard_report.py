"""The ``--shards`` run as plain-text tables (the JSON holds everything)."""

from __future__ import annotations

from typing import Any

from bench.report import _num, _table, header


def _costs(cost: dict[str, Any]) -> str:
    clusters = ", ".join(
        f"{name} {c['requests']} ({c['raft_entries']} Raft)"
        for name, c in cost["per_cluster"].items()
    )
    return f"{cost['seconds'] * 1000:.1f} ms, requests: {clusters}"


def render(results: dict[str, Any]) -> str:
    data = results["shards"]
    w = data["workload"]
    runs = data["runs"]
    lines = [
        header(results),
        f"workload: {w['executions']} executions x {w['steps']} steps = {w['total_steps']:,} "
        f"steps for every N, {w['workers']} worker processes on every cluster, concurrency "
        f"{w['concurrency_per_cluster']} per cluster; single-node clusters",
        f"note: {data['cpu_bound_note']}",
        "",
    ]
    first = runs[0]["clusters"] if runs else "-"
    base = runs[0]["workload"]["raft_entries"] if runs else 0
    base_cpu = runs[0]["workload"]["leader_cpu_s"] if runs else 0.0
    rows = []
    for run in runs:
        for c in run["workload"]["per_cluster"]:
            rows.append(
                [
                    str(run["clusters"]),
                    c["cluster"],
                    _num(c["executions"]),
                    _num(c["steps"]),
                    _num(c["share_of_steps"], 2),
                    _num(c["raft_entries"]),
                    f"{c['raft_entries_workers']:,} + {c['raft_entries_client']:,}",
                    _num(c["raft_per_step"], 3),
                    _num(c["leader_cpu_s"], 2),
                    f"{c['requests_workers']:,} + {c['requests_client']:,}",
                    _share(c["raft_entries"], base),
                    _share(c["leader_cpu_s"], base_cpu),
                ]
            )
    lines.append(
        _table(
            [
                "N",
                "cluster",
                "executions",
                "steps",
                "share",
                "Raft entries",
                "counted: workers + starts",
                "per step",
                "leader CPU s",
                "requests: workers + starts",
                f"entries / all at N={first}",
                f"CPU / all at N={first}",
            ],
            rows,
        )
    )
    lines.append("")
    totals = []
    for run in runs:
        t = run["workload"]
        cpu = t["cpu_cores"]
        rqlite = sum(v for k, v in cpu.items() if k not in ("workers", "bench"))
        totals.append(
            [
                str(run["clusters"]),
                _num(t["steady_steps_per_s"]),
                _num(t["steps_per_s"]),
                _num(t["raft_per_step"], 3),
                _num(t["commits_per_request"], 1),
                _turns(t.get("worker_stats", {})),
                _num(t["leader_cpu_s"], 2),
                _num(t["worker_cpu_s"], 2),
                _num(t["worker_cpu_ms_per_1k_steps"]),
                f"{rqlite:.2f} / {cpu.get('workers', 0):.2f} / {cpu.get('bench', 0):.2f}",
            ]
        )
    lines.append(
        _table(
            [
                "N",
                "steps/s (steady)",
                "steps/s (whole)",
                "Raft entries/step",
                "commits/request",
                "turns claimed / resumed",
                "leader CPU s, all",
                "worker CPU s",
                "worker CPU ms/1k steps",
                "cores: rqlite / workers / bench",
            ],
            totals,
        )
    )
    lines.append("")
    idle_rows = [
        [
            str(run["clusters"]),
            _num(run["idle"]["seconds"], 1),
            _num(run["idle"]["requests_per_s_per_worker_per_cluster"], 1),
            _num(run["idle"]["raft_entries_per_cluster"], 1),
            ", ".join(_num(c["leader_core_percent"], 2) for c in run["idle"]["per_cluster"]),
            _num(run["idle"]["worker_core_percent_per_worker"], 2),
        ]
        for run in runs
    ]
    lines.append(
        _table(
            [
                "N, idle",
                "seconds",
                "requests/s per worker per cluster",
                "Raft entries per cluster",
                "leader core % (each)",
                "worker core % (each)",
            ],
            idle_rows,
        )
    )
    lines.append("")
    for run in runs:
        writes = run["single_writes"]["per_cluster"]
        single = ", ".join(
            f"{name} {_num(w['leader_cpu_ms_per_write'], 2)}" for name, w in writes.items()
        )
        lines.append(
            f"N={run['clusters']}: a process's connect {_costs(run['connect'])}; "
            f"one list() {_costs(run['list'])}; leader CPU ms per unbatched write "
            f"({run['single_writes']['writes']} starts, no worker): {single}"
        )
    return "\n".join(lines)


def _turns(stats: dict[str, int]) -> str:
    if "claimed" not in stats:
        return "-"
    return f"{stats['claimed']:,} / {stats.get('resumed', 0):,}"


def _share(value: float, base: float) -> str:
    return f"{value / base:.2f}" if base else "-"
