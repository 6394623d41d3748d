-- Executions and their step records: every statement of RqliteStore and SqliteStore, sync
-- and async. The store lives in the same database as the queue (transports/queue.sql),
-- which lets one statement checkpoint a step, ack its event and publish the next one.
-- Times are parameters, never SQL's clock (see queue.sql).

-- name: schema.executions
CREATE TABLE IF NOT EXISTS executions (
  id           TEXT PRIMARY KEY,                    -- = the queue group of its events
  workflow     TEXT NOT NULL,                       -- registered workflow name
  status       TEXT NOT NULL,                       -- pending|running|succeeded|failed|cancelled
  input        TEXT NOT NULL,                       -- JSON
  output       TEXT,                                -- JSON, once succeeded
  error        TEXT,                                -- JSON {type, message, traceback}, once failed
  priority     INTEGER NOT NULL DEFAULT 0,
  created_at   REAL NOT NULL,
  updated_at   REAL NOT NULL,
  completed_at REAL,
  steps_done   INTEGER NOT NULL DEFAULT 0,
  commit_id    TEXT                                 -- last commit applied: retries check it
);

-- name: schema.executions_by_status
CREATE INDEX IF NOT EXISTS executions_by_status ON executions (status, created_at);

-- name: schema.executions_by_created
CREATE INDEX IF NOT EXISTS executions_by_created ON executions (created_at);

-- name: schema.steps
CREATE TABLE IF NOT EXISTS steps (
  execution_id TEXT NOT NULL,
  idx          INTEGER NOT NULL,                    -- call order within the workflow
  name         TEXT NOT NULL,
  status       TEXT NOT NULL,                       -- succeeded|failed
  output       TEXT,                                -- JSON
  error        TEXT,                                -- JSON {type, message, traceback}
  started_at   REAL NOT NULL,
  ended_at     REAL NOT NULL,
  worker_id    TEXT NOT NULL,
  PRIMARY KEY (execution_id, idx)
) WITHOUT ROWID;

-- name: schema.execution_starts
-- Inserting a row here starts an execution: its record and its first event, atomically.
-- Idempotent: an id that exists is left alone (engine.start(..., execution_id=...)).
CREATE VIEW IF NOT EXISTS execution_starts AS SELECT
  NULL AS id, NULL AS workflow, NULL AS input, NULL AS priority, NULL AS event,
  NULL AS now, NULL AS commit_id;

-- name: schema.on_execution_start
CREATE TRIGGER IF NOT EXISTS execution_start INSTEAD OF INSERT ON execution_starts BEGIN
  SELECT RAISE(IGNORE) WHERE EXISTS (SELECT 1 FROM executions WHERE id = NEW.id);
  INSERT INTO executions (id, workflow, status, input, priority, created_at, updated_at,
                          commit_id)
    VALUES (NEW.id, NEW.workflow, 'pending', NEW.input, NEW.priority, NEW.now, NEW.now,
            NEW.commit_id);
  INSERT INTO messages (group_id, event, priority, published_at)
    VALUES (NEW.id, NEW.event, NEW.priority, NEW.now);
END;

-- name: schema.execution_commits
-- Inserting a row here is one atomic, fenced commit of an execution's progress: the
-- checkpoint of a step (or the final status), the ack of the event the worker leases and
-- the publish of the next event. Each row succeeds or is skipped on its own, so one
-- multi-row INSERT carries the commits of many executions (one statement, one Raft entry).
CREATE VIEW IF NOT EXISTS execution_commits AS SELECT
  NULL AS execution_id, NULL AS lease_seq, NULL AS lease_token, NULL AS commit_id,
  NULL AS now, NULL AS worker_id,
  NULL AS step_idx, NULL AS step_name, NULL AS step_status, NULL AS step_output,
  NULL AS step_error, NULL AS step_started_at,
  NULL AS status, NULL AS output, NULL AS error,
  NULL AS next_event, NULL AS next_priority, NULL AS next_token, NULL AS next_expiry;

-- name: schema.drop_abort_commit_trigger
-- Databases made before the fence became RAISE(IGNORE) have the older trigger.
DROP TRIGGER IF EXISTS execution_commit;

-- name: schema.on_execution_commit
-- Fencing: only the holder of the live lease may commit; the row of a worker whose lease
-- lapsed and was taken over is skipped (RAISE(IGNORE): the other rows of the statement
-- go on) and changes nothing -- the outcome read tells it apart. The next event stays
-- leased to the committer (no new claim) when it asks (next_token) and no other event of
-- the execution is waiting -- a waiting one (a signal) must be delivered first, in order.
CREATE TRIGGER IF NOT EXISTS execution_commit_fenced INSTEAD OF INSERT ON execution_commits
BEGIN
  SELECT RAISE(IGNORE) WHERE NOT EXISTS (
    SELECT 1 FROM messages WHERE seq = NEW.lease_seq AND locked_by = NEW.lease_token);
  INSERT INTO steps (execution_id, idx, name, status, output, error, started_at, ended_at,
                     worker_id)
    SELECT NEW.execution_id, NEW.step_idx, NEW.step_name, NEW.step_status, NEW.step_output,
           NEW.step_error, NEW.step_started_at, NEW.now, NEW.worker_id
    WHERE NEW.step_idx IS NOT NULL;
  UPDATE executions SET
      status = COALESCE(NEW.status, status),
      output = COALESCE(NEW.output, output),
      error = COALESCE(NEW.error, error),
      updated_at = NEW.now,
      completed_at = CASE WHEN NEW.status IN ('succeeded', 'failed', 'cancelled')
                          THEN NEW.now ELSE completed_at END,
      steps_done = steps_done + (NEW.step_idx IS NOT NULL),
      commit_id = NEW.commit_id
    WHERE id = NEW.execution_id;
  -- Continuing in place is a turn of service: round-robin counts it as a claim.
  UPDATE groups SET last_claimed_at = NEW.now
    WHERE group_id = NEW.execution_id AND NEW.next_token IS NOT NULL;
  -- Insert the next event before deleting the current one, so the group row (and its
  -- round-robin position) survives; the delete trigger then recomputes ready_at.
  INSERT INTO messages (group_id, event, priority, published_at, locked_by, lock_expiry,
                        attempts)
    SELECT NEW.execution_id, NEW.next_event, NEW.next_priority, NEW.now,
           CASE WHEN hold THEN NEW.next_token END,
           CASE WHEN hold THEN NEW.next_expiry END,
           hold
    FROM (SELECT NEW.next_token IS NOT NULL AND NOT EXISTS (
            SELECT 1 FROM messages
            WHERE group_id = NEW.execution_id AND seq <> NEW.lease_seq) AS hold)
    WHERE NEW.next_event IS NOT NULL;
  DELETE FROM messages WHERE seq = NEW.lease_seq;
END;

-- name: start
INSERT INTO execution_starts (id, workflow, input, priority, event, now, commit_id)
VALUES (:id, :workflow, :input, :priority, :event, :now, :commit_id);

-- name: started
-- Whether this start created the execution (its commit id) or found it already there.
SELECT commit_id = :commit_id AS created FROM executions WHERE id = :id;

-- name: commit
-- The commits of a batch as one JSON array (one object per commit, keys = the view's
-- columns): one static statement whatever the batch size. rqlite 8.26 prepares every
-- statement anew on every node, and preparing this trigger chain costs more than
-- running it, so one multi-row statement is several times cheaper than one per commit.
INSERT INTO execution_commits (
  execution_id, lease_seq, lease_token, commit_id, now, worker_id,
  step_idx, step_name, step_status, step_output, step_error, step_started_at,
  status, output, error, next_event, next_priority, next_token, next_expiry)
SELECT
  json_extract(c.value, '$.execution_id'), json_extract(c.value, '$.lease_seq'),
  json_extract(c.value, '$.lease_token'), json_extract(c.value, '$.commit_id'),
  json_extract(c.value, '$.now'), json_extract(c.value, '$.worker_id'),
  json_extract(c.value, '$.step_idx'), json_extract(c.value, '$.step_name'),
  json_extract(c.value, '$.step_status'), json_extract(c.value, '$.step_output'),
  json_extract(c.value, '$.step_error'), json_extract(c.value, '$.step_started_at'),
  json_extract(c.value, '$.status'), json_extract(c.value, '$.output'),
  json_extract(c.value, '$.error'), json_extract(c.value, '$.next_event'),
  json_extract(c.value, '$.next_priority'), json_extract(c.value, '$.next_token'),
  json_extract(c.value, '$.next_expiry')
FROM json_each(:commits) AS c;

-- name: commit_outcome
-- Read in the same request as the commit: did each commit apply (now or in an earlier
-- attempt of the same request), and which message does its committer lease now, if any.
SELECT c.key AS position, e.commit_id = json_extract(c.value, '$.commit_id') AS applied,
       m.seq AS next_seq, m.lock_expiry AS next_expiry
FROM json_each(:commits) AS c
LEFT JOIN executions AS e ON e.id = json_extract(c.value, '$.execution_id')
LEFT JOIN messages AS m
  ON m.group_id = e.id AND m.locked_by = json_extract(c.value, '$.lease_token');

-- name: mark_claimed_running
-- `+status`: look the claimed executions up by id. Left to itself SQLite walks the
-- status index, i.e. every pending execution (40 ms at 100k pending, 0.03 ms by id).
UPDATE executions SET status = 'running', updated_at = :now
WHERE +status = 'pending'
  AND id IN (SELECT group_id FROM messages WHERE locked_by = :token);

-- name: claimed_executions
SELECT id, workflow, status, input, output, error, priority, created_at, updated_at,
       completed_at, steps_done
FROM executions WHERE id IN (SELECT group_id FROM messages WHERE locked_by = :token);

-- name: claimed_steps
SELECT execution_id, idx, name, status, output, error, started_at, ended_at, worker_id
FROM steps WHERE execution_id IN (SELECT group_id FROM messages WHERE locked_by = :token)
ORDER BY execution_id, idx;

-- name: get
SELECT id, workflow, status, input, output, error, priority, created_at, updated_at,
       completed_at, steps_done
FROM executions WHERE id = :id;

-- name: list_all
SELECT id, workflow, status, input, output, error, priority, created_at, updated_at,
       completed_at, steps_done
FROM executions ORDER BY created_at DESC, id LIMIT :limit;

-- name: list_by_status
SELECT id, workflow, status, input, output, error, priority, created_at, updated_at,
       completed_at, steps_done
FROM executions WHERE status = :status ORDER BY created_at DESC, id LIMIT :limit;

-- name: steps
SELECT execution_id, idx, name, status, output, error, started_at, ended_at, worker_id
FROM steps WHERE execution_id = :id ORDER BY idx;

-- name: counts
SELECT status, COUNT(*) AS n FROM executions GROUP BY status;
