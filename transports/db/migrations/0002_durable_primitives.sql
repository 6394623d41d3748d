-- Migration 2: durable primitives -- retries, sleeps, signals, events out, child
-- workflows, cancels and timeouts.
--
-- The rule they all follow: an execution's queue group holds one event, its head. A wait
-- (a sleep, a retry's back-off, a recv, a child's result) is that event *parked* until its
-- deadline: no lease, no worker slot, no Raft entry while it waits. Whatever can end a wait
-- early -- a signal, a child finishing, a cancel -- is written in the same statement that
-- *wakes* the parked event (its deadline becomes now), so the one worker that claims it
-- next sees everything in one total order. A commit that parks checks the same conditions,
-- so a signal racing a park is never missed: Raft orders the two statements, and whichever
-- comes second sees the other.
--
-- Rolling upgrade: expand only. Workers of version 1 keep running beside version 2: the
-- new columns have defaults, the views keep their old columns (version 1's commits and
-- starts still work, with the new columns NULL) and the triggers give their rows the same
-- effect as before. Only workflows that use the new primitives need version 2 workers.

-- name: steps.kind
-- What the call is: step, sleep, recv, send, child, wait, event.
ALTER TABLE steps ADD COLUMN kind TEXT NOT NULL DEFAULT 'step';

-- name: steps.attempts
ALTER TABLE steps ADD COLUMN attempts INTEGER NOT NULL DEFAULT 1;

-- name: steps.wake_at
-- A sleep's wake time, a recv's or a wait's deadline, a retry's next attempt.
ALTER TABLE steps ADD COLUMN wake_at REAL;

-- name: steps.history
-- The failed attempts of a retried step: JSON [{attempt, type, message, started_at, ended_at}].
ALTER TABLE steps ADD COLUMN history TEXT;

-- name: executions.parent_id
ALTER TABLE executions ADD COLUMN parent_id TEXT;

-- name: executions.cancel_reason
-- Set by a cancel (or a parent's, or a timeout): the next worker to handle it cancels it.
ALTER TABLE executions ADD COLUMN cancel_reason TEXT;

-- name: executions.deadline
-- @engine.workflow(timeout=...): cancelled if still running then.
ALTER TABLE executions ADD COLUMN deadline REAL;

-- name: executions.by_parent
CREATE INDEX executions_by_parent ON executions (parent_id) WHERE parent_id IS NOT NULL;

-- name: signals
CREATE TABLE signals (
  seq          INTEGER PRIMARY KEY AUTOINCREMENT,     -- send order
  execution_id TEXT NOT NULL,
  topic        TEXT NOT NULL,                         -- '' for the default topic
  payload      TEXT NOT NULL,                         -- JSON
  key          TEXT NOT NULL,                         -- idempotency key of the send
  sent_at      REAL NOT NULL,
  consumed_idx INTEGER,                               -- the recv that took it
  consumed_at  REAL
);

-- name: signals.unread
CREATE INDEX signals_unread ON signals (execution_id, topic, seq) WHERE consumed_idx IS NULL;

-- name: signals.by_key
CREATE UNIQUE INDEX signals_by_key ON signals (execution_id, key);

-- name: events
CREATE TABLE events (
  execution_id TEXT NOT NULL,
  key          TEXT NOT NULL,
  value        TEXT NOT NULL,                         -- JSON
  updated_at   REAL NOT NULL,
  PRIMARY KEY (execution_id, key)
) WITHOUT ROWID;

-- name: starts.drop_trigger
DROP TRIGGER execution_start;

-- name: starts.drop_view
DROP VIEW execution_starts;

-- name: starts.view
-- Inserting a row here starts an execution: its record and its first event, atomically.
-- Idempotent: an id that exists is left alone (engine.start(..., execution_id=...)). With
-- lease_token the first event is published already leased, to a worker of the process
-- that starts it (no poll, no claim: the start fast path of engine/app.py).
CREATE VIEW execution_starts AS SELECT
  NULL AS id, NULL AS workflow, NULL AS input, NULL AS priority, NULL AS event,
  NULL AS now, NULL AS commit_id, NULL AS parent_id, NULL AS deadline,
  NULL AS lease_token, NULL AS lease_expiry;

-- name: starts.trigger
CREATE TRIGGER execution_start INSTEAD OF INSERT ON execution_starts BEGIN
  SELECT RAISE(IGNORE) WHERE EXISTS (SELECT 1 FROM executions WHERE id = NEW.id);
  INSERT INTO executions (id, workflow, status, input, priority, created_at, updated_at,
                          commit_id, parent_id, deadline)
    VALUES (NEW.id, NEW.workflow,
            CASE WHEN NEW.lease_token IS NULL THEN 'pending' ELSE 'running' END,
            NEW.input, NEW.priority, NEW.now, NEW.now,
            NEW.commit_id, NEW.parent_id, NEW.deadline);
  INSERT INTO messages (group_id, event, priority, published_at, locked_by, lock_expiry,
                        attempts)
    VALUES (NEW.id, NEW.event, NEW.priority, NEW.now, NEW.lease_token, NEW.lease_expiry,
            NEW.lease_token IS NOT NULL);
END;

-- name: commits.drop_trigger
DROP TRIGGER execution_commit_fenced;

-- name: commits.drop_view
DROP VIEW execution_commits;

-- name: commits.view
-- Inserting a row here is one atomic, fenced commit of an execution's progress: the
-- record of a call (a step, a sleep, a recv...) or the final status, the ack of the event
-- the worker leases and the publish of the next event -- kept leased to the committer
-- (next_token), parked until park_until, or free. Each row succeeds or is skipped on its
-- own, so one multi-row INSERT carries the commits of many executions.
CREATE VIEW execution_commits AS SELECT
  NULL AS execution_id, NULL AS lease_seq, NULL AS lease_token, NULL AS commit_id,
  NULL AS now, NULL AS worker_id,
  NULL AS step_idx, NULL AS step_name, NULL AS step_status, NULL AS step_output,
  NULL AS step_error, NULL AS step_started_at,
  NULL AS status, NULL AS output, NULL AS error,
  NULL AS next_event, NULL AS next_priority, NULL AS next_token, NULL AS next_expiry,
  NULL AS step_kind, NULL AS step_attempts, NULL AS step_wake_at, NULL AS step_attempt,
  NULL AS consume_signal, NULL AS park_until, NULL AS wake_topic, NULL AS wake_child;

-- name: commits.trigger
-- Fencing: only the holder of the live lease may commit; the row of a worker whose lease
-- lapsed is skipped (RAISE(IGNORE): the other rows of the statement go on). A call that
-- waits (status 'waiting' or 'retrying') is recorded and completed later by an upsert of
-- the same row. The next event stays leased to the committer while its turn lasts and
-- nothing else is pending (no other event, no cancel); a parked one is woken at once if
-- what it waits for is already there.
CREATE TRIGGER execution_commit_fenced INSTEAD OF INSERT ON execution_commits
BEGIN
  SELECT RAISE(IGNORE) WHERE NOT EXISTS (
    SELECT 1 FROM messages WHERE seq = NEW.lease_seq AND locked_by = NEW.lease_token);
  INSERT INTO steps (execution_id, idx, name, status, output, error, started_at, ended_at,
                     worker_id, kind, attempts, wake_at, history)
    SELECT NEW.execution_id, NEW.step_idx, NEW.step_name, NEW.step_status, NEW.step_output,
           NEW.step_error, NEW.step_started_at, NEW.now, NEW.worker_id,
           COALESCE(NEW.step_kind, 'step'), COALESCE(NEW.step_attempts, 1), NEW.step_wake_at,
           CASE WHEN NEW.step_attempt IS NOT NULL THEN json_array(json(NEW.step_attempt)) END
    WHERE NEW.step_idx IS NOT NULL
    ON CONFLICT (execution_id, idx) DO UPDATE SET
      status = excluded.status, output = excluded.output, error = excluded.error,
      ended_at = excluded.ended_at, worker_id = excluded.worker_id,
      attempts = excluded.attempts, wake_at = excluded.wake_at,
      history = CASE WHEN NEW.step_attempt IS NULL THEN history
                     ELSE json_insert(COALESCE(history, '[]'), '$[#]', json(NEW.step_attempt))
                END;
  UPDATE signals SET consumed_idx = NEW.step_idx, consumed_at = NEW.now
    WHERE seq = NEW.consume_signal AND execution_id = NEW.execution_id
      AND consumed_idx IS NULL;
  UPDATE executions SET
      status = COALESCE(NEW.status, status),
      output = COALESCE(NEW.output, output),
      error = COALESCE(NEW.error, error),
      updated_at = NEW.now,
      completed_at = CASE WHEN NEW.status IN ('succeeded', 'failed', 'cancelled')
                          THEN NEW.now ELSE completed_at END,
      steps_done = steps_done + (COALESCE(NEW.step_status IN ('succeeded', 'failed'), 0)),
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
           CASE WHEN hold THEN NEW.next_token
                WHEN NEW.park_until IS NOT NULL THEN '__parked__' END,
           CASE WHEN hold THEN NEW.next_expiry
                WHEN NEW.park_until IS NOT NULL
                THEN CASE WHEN woken THEN NEW.now ELSE NEW.park_until END END,
           hold
    FROM (SELECT
            NEW.next_token IS NOT NULL AND NEW.park_until IS NULL AND cancel IS NULL
              AND NOT EXISTS (SELECT 1 FROM messages
                              WHERE group_id = NEW.execution_id AND seq <> NEW.lease_seq)
              AS hold,
            cancel IS NOT NULL
              OR (NEW.wake_topic IS NOT NULL AND EXISTS (
                    SELECT 1 FROM signals WHERE execution_id = NEW.execution_id
                      AND topic = NEW.wake_topic AND consumed_idx IS NULL))
              OR (NEW.wake_child IS NOT NULL AND EXISTS (
                    SELECT 1 FROM executions WHERE id = NEW.wake_child
                      AND status IN ('succeeded', 'failed', 'cancelled')))
              AS woken
          FROM (SELECT cancel_reason AS cancel FROM executions WHERE id = NEW.execution_id))
    WHERE NEW.next_event IS NOT NULL;
  DELETE FROM messages WHERE seq = NEW.lease_seq;
END;

-- name: finished.trigger
-- An execution that finishes wakes its parent (waiting on it, or not: a spurious wake
-- costs a claim, a missed one a deadline); a cancelled one takes its children with it.
-- Times come from the row (the committer's clock), never from SQL's.
CREATE TRIGGER execution_finished AFTER UPDATE OF status ON executions
WHEN NEW.status IN ('succeeded', 'failed', 'cancelled')
 AND OLD.status NOT IN ('succeeded', 'failed', 'cancelled')
BEGIN
  UPDATE messages SET lock_expiry = NEW.updated_at
    WHERE NEW.parent_id IS NOT NULL AND group_id = NEW.parent_id
      AND locked_by = '__parked__' AND lock_expiry > NEW.updated_at;
  UPDATE executions SET cancel_reason = COALESCE(cancel_reason, 'its parent was cancelled'),
                        updated_at = NEW.updated_at
    WHERE NEW.status = 'cancelled' AND parent_id = NEW.id
      AND status NOT IN ('succeeded', 'failed', 'cancelled');
  UPDATE messages SET lock_expiry = NEW.updated_at
    WHERE NEW.status = 'cancelled' AND locked_by = '__parked__'
      AND lock_expiry > NEW.updated_at
      AND group_id IN (SELECT id FROM executions WHERE parent_id = NEW.id);
END;

-- name: cancels.view
-- Inserting a row here asks for an execution's cancel: one statement, ordered by Raft
-- with everything else that happens to it. A finished execution is left as it is.
CREATE VIEW execution_cancels AS SELECT NULL AS id, NULL AS reason, NULL AS now;

-- name: cancels.trigger
CREATE TRIGGER execution_cancel INSTEAD OF INSERT ON execution_cancels BEGIN
  UPDATE executions SET cancel_reason = COALESCE(cancel_reason, NEW.reason),
                        updated_at = NEW.now
    WHERE id = NEW.id AND status NOT IN ('succeeded', 'failed', 'cancelled');
  UPDATE messages SET lock_expiry = NEW.now
    WHERE group_id = NEW.id AND locked_by = '__parked__' AND lock_expiry > NEW.now;
END;

-- name: sends.view
-- Inserting a row here sends a signal: stored for the recv that will take it, and the
-- execution woken if it waits. Idempotent by key (a retried send adds nothing); a send to
-- an unknown or finished execution fails and stores nothing.
CREATE VIEW signal_sends AS SELECT
  NULL AS execution_id, NULL AS topic, NULL AS payload, NULL AS key, NULL AS now;

-- name: sends.trigger
CREATE TRIGGER signal_send INSTEAD OF INSERT ON signal_sends BEGIN
  SELECT RAISE(IGNORE) WHERE EXISTS (
    SELECT 1 FROM signals WHERE execution_id = NEW.execution_id AND key = NEW.key);
  SELECT RAISE(ABORT, 'raftflow: no such execution') WHERE NOT EXISTS (
    SELECT 1 FROM executions WHERE id = NEW.execution_id);
  SELECT RAISE(ABORT, 'raftflow: the execution is finished') WHERE EXISTS (
    SELECT 1 FROM executions WHERE id = NEW.execution_id
      AND status IN ('succeeded', 'failed', 'cancelled'));
  INSERT INTO signals (execution_id, topic, payload, key, sent_at)
    VALUES (NEW.execution_id, NEW.topic, NEW.payload, NEW.key, NEW.now);
  UPDATE messages SET lock_expiry = NEW.now
    WHERE group_id = NEW.execution_id AND locked_by = '__parked__' AND lock_expiry > NEW.now;
END;
