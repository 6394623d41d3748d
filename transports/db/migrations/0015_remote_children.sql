-- Migration 15: children on another cluster of a sharded deployment, and the outbox that
-- tells their parents (engine/shards/, stores/outbox.sql).
--
-- A parent starts a child whose id routes to another cluster by noting it here first
-- (`remote_children`, status 'pending'), then starting it there (idempotent by its id).
-- When the child finishes, its cluster's trigger writes an `outbox` row for the parent;
-- a worker of that cluster relays it (at least once) to the parent's cluster, where it
-- updates the note (once: only a note not yet final) and wakes the parent, as a local
-- child's finish does. A parent cancelled with children elsewhere writes an outbox row
-- per child, relayed as a cancel there. The commit that parks a parent waiting for a child
-- now also finds a child that finished elsewhere (`execution_commit_fenced`, restated).
--
-- Rolling upgrade: workers of version 14 keep running beside version 15 on an unsharded
-- database (no remote child exists there; the outbox only gets a row for a child whose
-- parent is gone, which a relay of version 15 drops).

-- name: remote_children
CREATE TABLE remote_children (
  parent_id     TEXT NOT NULL,
  id            TEXT NOT NULL,               -- the child's id, on another cluster
  workflow      TEXT NOT NULL,
  status        TEXT NOT NULL,               -- 'pending' until its outcome is relayed
  output        TEXT,
  error         TEXT,
  cancel_reason TEXT,
  updated_at    REAL NOT NULL,
  PRIMARY KEY (parent_id, id)
) WITHOUT ROWID;

-- name: outbox
CREATE TABLE outbox (
  seq        INTEGER PRIMARY KEY AUTOINCREMENT,
  target     TEXT NOT NULL,                  -- the execution it is for
  kind       TEXT NOT NULL,                  -- 'child_finished' or 'cancel'
  source     TEXT NOT NULL,                  -- the execution it is from
  payload    TEXT,                           -- JSON (a child's outcome)
  created_at REAL NOT NULL,
  UNIQUE (target, kind, source)
);

-- name: child_finished_elsewhere
-- A child whose parent is not on this cluster finished: tell the parent's cluster.
CREATE TRIGGER child_finished_elsewhere AFTER UPDATE OF status ON executions
WHEN NEW.status IN ('succeeded', 'failed', 'cancelled')
 AND OLD.status NOT IN ('succeeded', 'failed', 'cancelled')
 AND NEW.parent_id IS NOT NULL
BEGIN
  INSERT INTO outbox (target, kind, source, payload, created_at)
    SELECT NEW.parent_id, 'child_finished', NEW.id,
           json_object('workflow', NEW.workflow, 'status', NEW.status,
                       'output', NEW.output, 'error', NEW.error,
                       'cancel_reason', NEW.cancel_reason),
           NEW.updated_at
    WHERE NOT EXISTS (SELECT 1 FROM executions WHERE id = NEW.parent_id)
    ON CONFLICT (target, kind, source) DO NOTHING;
END;

-- name: parent_cancelled_elsewhere
-- A cancelled parent's children on other clusters are cancelled with it, as its own are.
CREATE TRIGGER parent_cancelled_elsewhere AFTER UPDATE OF status ON executions
WHEN NEW.status = 'cancelled' AND OLD.status NOT IN ('succeeded', 'failed', 'cancelled')
BEGIN
  INSERT INTO outbox (target, kind, source, payload, created_at)
    SELECT id, 'cancel', NEW.id, NULL, NEW.updated_at FROM remote_children
    WHERE parent_id = NEW.id AND status NOT IN ('succeeded', 'failed', 'cancelled')
    ON CONFLICT (target, kind, source) DO NOTHING;
END;

-- name: drop_commit_trigger
DROP TRIGGER execution_commit_fenced;

-- name: commit_trigger
-- Migration 2's, and a parent waiting for a child that finished elsewhere is woken.
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
  UPDATE groups SET last_claimed_at = NEW.now
    WHERE group_id = NEW.execution_id AND NEW.next_token IS NOT NULL;
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
              OR (NEW.wake_child IS NOT NULL AND EXISTS (
                    SELECT 1 FROM remote_children
                    WHERE parent_id = NEW.execution_id AND id = NEW.wake_child
                      AND status IN ('succeeded', 'failed', 'cancelled')))
              AS woken
          FROM (SELECT cancel_reason AS cancel FROM executions WHERE id = NEW.execution_id))
    WHERE NEW.next_event IS NOT NULL;
  DELETE FROM messages WHERE seq = NEW.lease_seq;
END;
