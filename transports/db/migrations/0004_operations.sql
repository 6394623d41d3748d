-- Migration 4: what operators look at -- the CLI's and the dashboard's reads, worker
-- presence, and the trace context an execution continues.
--
-- Rolling upgrade: expand only. Workers of version 3 keep running beside version 4: the
-- new column has a default (NULL) and nothing of version 3 reads or writes the new tables.
-- Version 3 workers simply do not appear in `raftflow workers` (their leases still show
-- in `raftflow queue`).

-- name: executions.trace_context
-- The W3C trace context (JSON {"traceparent": ..., "tracestate": ...}) of the code that
-- started the execution, when it ran in a trace: the worker's spans continue that trace.
ALTER TABLE executions ADD COLUMN trace_context TEXT;

-- name: executions.by_workflow
-- `raftflow list --workflow`, the dashboard's workflow filter: newest first within a
-- workflow (a status filter walks the same range).
CREATE INDEX executions_by_workflow ON executions (workflow, created_at);

-- name: workers
-- One row per worker process, upserted by its presence beat (every 10 s, one request):
-- `raftflow workers` lists those seen in the last minute. Rows of workers not seen for a
-- day are deleted by the beats of the others.
CREATE TABLE workers (
  worker_id    TEXT PRIMARY KEY,                     -- host:pid:random (the lease tokens' prefix)
  host         TEXT NOT NULL,
  pid          INTEGER NOT NULL,
  version      TEXT NOT NULL,                        -- raftflow's version
  concurrency  INTEGER NOT NULL,
  min_priority INTEGER NOT NULL DEFAULT 0,
  state        TEXT NOT NULL,                        -- running | draining | stopped
  started_at   REAL NOT NULL,
  seen_at      REAL NOT NULL,                        -- its last beat (cluster clock)
  steps        INTEGER NOT NULL DEFAULT 0,           -- steps committed since it started
  running      INTEGER NOT NULL DEFAULT 0            -- executions in its hands at the beat
) WITHOUT ROWID;

-- name: workers.seen
CREATE INDEX workers_seen ON workers (seen_at);

-- name: worker_duties
-- A duty one worker at a time performs (the queue-depth sample of the metrics), held as
-- a lease that its holder renews with its beat and any worker takes once it lapsed.
CREATE TABLE worker_duties (
  duty      TEXT PRIMARY KEY,
  worker_id TEXT NOT NULL,
  expiry    REAL NOT NULL
) WITHOUT ROWID;
