-- Migration 1: the schema of raftflow 0.1, the first versioned release (the queue's tables,
-- then the store's). Every statement is idempotent (IF NOT EXISTS), so a database created
-- before schema versions existed is brought to version 1 by applying it.
--
-- A migration is a sequence of `-- name:` blocks (transports/db/catalogue.py), applied in file
-- order as one transaction: one rqlite request, one Raft entry, all or nothing.

-- ---------------------------------------------------------------- queue

-- name: queue.messages
CREATE TABLE IF NOT EXISTS messages (
  seq          INTEGER PRIMARY KEY AUTOINCREMENT,  -- FIFO order + the Lease handle
  group_id     TEXT NOT NULL,                      -- the exclusivity group (execution id)
  event        TEXT NOT NULL,                      -- the event, JSON
  locked_by    TEXT,                               -- lease token / '__parked__' / NULL
  lock_expiry  REAL,                               -- lease/park deadline; NULL/0 when free
  priority     INTEGER NOT NULL DEFAULT 0,         -- the group's priority on first publish
  published_at REAL NOT NULL DEFAULT 0,
  attempts     INTEGER NOT NULL DEFAULT 0,         -- how many times it was claimed
  dedup_key    TEXT                                -- idempotency key of the publish
);

-- name: queue.messages_by_group
CREATE INDEX IF NOT EXISTS messages_by_group ON messages (group_id, seq);

-- name: queue.messages_by_token
CREATE INDEX IF NOT EXISTS messages_by_token ON messages (locked_by) WHERE locked_by IS NOT NULL;

-- name: queue.groups
CREATE TABLE IF NOT EXISTS groups (
  group_id        TEXT PRIMARY KEY,                -- one row per group that has messages
  last_claimed_at REAL NOT NULL DEFAULT 0.0,       -- last claim (0 = never claimed)
  priority        INTEGER NOT NULL DEFAULT 0,      -- set on first publish; 0-4
  ready_at        REAL NOT NULL DEFAULT 0.0        -- claimable once ready_at <= now
);

-- name: queue.groups_ready
CREATE INDEX IF NOT EXISTS groups_ready ON groups (priority, ready_at);

-- name: queue.message_keys
CREATE TABLE IF NOT EXISTS message_keys (
  key          TEXT PRIMARY KEY,                   -- publish idempotency keys, kept for a window
  published_at REAL NOT NULL
);

-- name: queue.message_keys_age
CREATE INDEX IF NOT EXISTS message_keys_age ON message_keys (published_at);

-- name: queue.on_message_insert
-- A new group starts never-claimed (ready_at 0). A message inserted already leased (the
-- engine's in-place continuation) blocks its group until the lease deadline.
CREATE TRIGGER IF NOT EXISTS messages_after_insert AFTER INSERT ON messages BEGIN
  INSERT OR IGNORE INTO groups (group_id, priority) VALUES (NEW.group_id, NEW.priority);
  INSERT OR IGNORE INTO message_keys (key, published_at)
    SELECT NEW.dedup_key, NEW.published_at WHERE NEW.dedup_key IS NOT NULL;
  UPDATE groups SET ready_at = NEW.lock_expiry
    WHERE group_id = NEW.group_id AND NEW.locked_by IS NOT NULL
      AND NEW.seq = (SELECT MIN(seq) FROM messages WHERE group_id = NEW.group_id);
END;

-- name: queue.on_message_delete
-- ack: the group row goes with its last message; otherwise its next head decides.
CREATE TRIGGER IF NOT EXISTS messages_after_delete AFTER DELETE ON messages BEGIN
  DELETE FROM groups WHERE group_id = OLD.group_id
    AND NOT EXISTS (SELECT 1 FROM messages WHERE group_id = OLD.group_id);
  UPDATE groups SET ready_at = (
      SELECT CASE WHEN m.locked_by IS NULL THEN groups.last_claimed_at ELSE m.lock_expiry END
      FROM messages AS m WHERE m.group_id = OLD.group_id ORDER BY m.seq LIMIT 1)
    WHERE group_id = OLD.group_id;
END;

-- name: queue.on_message_lease
-- claim, nack, park, extend: the head's lease state decides when the group is claimable.
CREATE TRIGGER IF NOT EXISTS messages_after_lease AFTER UPDATE OF locked_by, lock_expiry ON messages
BEGIN
  UPDATE groups SET ready_at = (
      SELECT CASE WHEN m.locked_by IS NULL THEN groups.last_claimed_at ELSE m.lock_expiry END
      FROM messages AS m WHERE m.group_id = NEW.group_id ORDER BY m.seq LIMIT 1)
    WHERE group_id = NEW.group_id;
END;

-- ---------------------------------------------------------------- store

-- name: store.executions
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

-- name: store.executions_by_status
CREATE INDEX IF NOT EXISTS executions_by_status ON executions (status, created_at);

-- name: store.executions_by_created
CREATE INDEX IF NOT EXISTS executions_by_created ON executions (created_at);

-- name: store.steps
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

-- name: store.execution_starts
-- Inserting a row here starts an execution: its record and its first event, atomically.
-- Idempotent: an id that exists is left alone (engine.start(..., execution_id=...)).
CREATE VIEW IF NOT EXISTS execution_starts AS SELECT
  NULL AS id, NULL AS workflow, NULL AS input, NULL AS priority, NULL AS event,
  NULL AS now, NULL AS commit_id;

-- name: store.on_execution_start
CREATE TRIGGER IF NOT EXISTS execution_start INSTEAD OF INSERT ON execution_starts BEGIN
  SELECT RAISE(IGNORE) WHERE EXISTS (SELECT 1 FROM executions WHERE id = NEW.id);
  INSERT INTO executions (id, workflow, status, input, priority, created_at, updated_at,
                          commit_id)
    VALUES (NEW.id, NEW.workflow, 'pending', NEW.input, NEW.priority, NEW.now, NEW.now,
            NEW.commit_id);
  INSERT INTO messages (group_id, event, priority, published_at)
    VALUES (NEW.id, NEW.event, NEW.priority, NEW.now);
END;

-- name: store.execution_commits
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

-- name: store.drop_abort_commit_trigger
-- Databases made before the fence became RAISE(IGNORE) have the older trigger.
DROP TRIGGER IF EXISTS execution_commit;

-- name: store.on_execution_commit
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
