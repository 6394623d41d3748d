-- Migration 13: durable streams -- values a workflow appends to a key, read live by anyone.
--
-- A stream is the rows of one (execution, key), numbered by `position` from 0. A row is
-- written by the commit that records its workflow call (engine/workflow/streams.py), in
-- the same transaction: a replayed call is never appended again, and the
-- (execution, run, call) key makes a second insert of one call fail rather than
-- duplicate. A close is a last row with `closed` = 1 and no value. Retention deletes an
-- execution's streams with it (stores/retention.sql).
--
-- Rolling upgrade: workers of version 12 keep running beside version 13 (a new table,
-- which they neither read nor write).

-- name: streams
CREATE TABLE streams (
  execution_id TEXT NOT NULL,
  key          TEXT NOT NULL,
  position     INTEGER NOT NULL,                      -- 0, 1, 2... in the order written
  value        TEXT,                                  -- JSON; NULL on the close row
  closed       INTEGER NOT NULL DEFAULT 0,            -- 1: the close, the last row
  run          INTEGER NOT NULL,                      -- the run and call that wrote it
  call_idx     INTEGER NOT NULL,
  written_at   REAL NOT NULL,
  PRIMARY KEY (execution_id, key, position)
) WITHOUT ROWID;

-- name: streams.by_call
CREATE UNIQUE INDEX streams_by_call ON streams (execution_id, run, call_idx);
