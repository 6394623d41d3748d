"""raftflow's benchmark suite: ``python -m bench`` (see ``docs/performance.md``).

It starts its own local 3-node rqlite cluster and measures, in one run and side by side:

- the raw ceiling: single-statement write requests/s, 1 client and W processes x C clients;
- raftflow: W worker processes x concurrency C running E executions of K steps
  (steps/s, executions/s, step-to-step latency, end-to-end latency of a 1-step workflow);
- the spec's naive queue protocol running the same E x K workload;
- Raft entries and HTTP round trips per step, counted in the worker processes and
  cross-checked with the leader's Raft applied index; worker CPU and RSS.

Modules, one job each:

=============  ======================================================================
cli            the command line, the phases of a run, the JSON file
settings       the parameters of a run and the ``--smoke`` preset
cluster        the cluster seen from the benchmark: leader, Raft index, weak reads
children       child processes: spawn, READY / MARK lines, stop, their JSON
sampler        CPU and RSS of the processes, sampled with psutil
counting       exact request / round-trip / Raft-entry accounting inside a process
raw            the raw-ceiling client process (``python -m bench.raw``)
app            the workflows the raftflow workers run
worker         the raftflow worker process (``python -m bench.worker``)
naive          the spec's naive protocol: schema and worker (``python -m bench.naive``)
phases         the raw, raftflow and end-to-end phases
naive_phase    the naive baseline's phase
summary        a window of worker counters added up, per step; the raftflow summary
latency        percentiles, step-to-step gaps, steady-state throughput
scale          ``--mode scale``: claim latency at 10 vs 100k queued, RSS over 100k steps
cost           ``--mode cost``: rqlite CPU per request, leader vs followers
sqlite_cost    raftflow's statements in SQLite alone: prepare vs run, claim statements
retention      ``python -m bench.retention``: claims with and without retention deleting;
               the database's size under a steady load with a short retention
report         the tables
progress       one line per phase with a counter
=============  ======================================================================
"""
